//! The memory ceiling for values, and the checks made before allocating them.
//!
//! Sizes that come from input (a shape in HLO text, a `.npy` header, a module built through the
//! library) can ask for more memory than the machine has; allocating first would abort the
//! process ("memory allocation of N bytes failed"), which kills a framework that embeds Axle.
//! So whoever allocates a value whose size comes from input asks a [`MemoryBudget`] first, and
//! allocates fallibly ([`try_zeroed`]); both failures are [`MemoryError`] values naming what
//! needed the memory, the bytes needed and the bytes available.
//!
//! The ceiling ([`limit`]) is, in order of precedence: the value given to [`set_limit`] (the
//! CLI's `--memory-limit`), the environment variable `AXLE_MEMORY_LIMIT` (bytes, or a number
//! with a `K`, `M`, `G` or `T` suffix, powers of 1024), or the memory the system reported
//! available (`MemAvailable` in `/proc/meminfo`) when the ceiling was first needed; with none of
//! these, there is no ceiling and only fallible allocation guards. It is read once per process
//! unless set again. A budget counts what one run holds at once (its inputs, live values,
//! outputs and temporaries), so the same run fails or succeeds the same way whatever else the
//! process is doing.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Where the ceiling came from, for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitSource {
    /// [`set_limit`] (the CLI's `--memory-limit`).
    Set,
    /// The `AXLE_MEMORY_LIMIT` environment variable.
    Environment,
    /// The memory the system reported available.
    System,
    /// No ceiling is known (or the allocator itself refused).
    None,
}

impl LimitSource {
    fn describe(self) -> &'static str {
        match self {
            LimitSource::Set => "the memory limit",
            LimitSource::Environment => "the memory limit AXLE_MEMORY_LIMIT",
            LimitSource::System => "the memory the system has available",
            LimitSource::None => "no known limit",
        }
    }
}

/// A value could not be given the memory it needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryError {
    /// What needed the memory (`%b (broadcast)`, `parameter 0 ('x')`, `the temporary block`).
    pub what: String,
    /// Bytes needed.
    pub needed: u64,
    /// Bytes available to it when it asked.
    pub available: u64,
    /// Where the ceiling came from.
    pub source: LimitSource,
}

impl fmt::Display for MemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.source == LimitSource::None {
            return write!(
                f,
                "{} needs {} bytes ({}), which the system refused to allocate",
                self.what,
                self.needed,
                human(self.needed)
            );
        }
        write!(
            f,
            "{} needs {} bytes ({}) but only {} bytes ({}) are available under {}",
            self.what,
            self.needed,
            human(self.needed),
            self.available,
            human(self.available),
            self.source.describe()
        )
    }
}

impl std::error::Error for MemoryError {}

/// `n` bytes in the largest binary unit that keeps one digit before the point (`1.5 GiB`).
pub fn human(n: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Why a memory size or the ceiling's setting is refused ([`parse_size`], [`limit`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MemoryLimitError {
    /// The text is not a size.
    #[error("invalid memory size '{0}' (expected bytes or a number with K, M, G or T)")]
    Invalid(String),
    /// The size does not fit in 64 bits.
    #[error("memory size '{0}' is too large")]
    TooLarge(String),
    /// `AXLE_MEMORY_LIMIT` is not a size.
    #[error("AXLE_MEMORY_LIMIT: {0}")]
    Environment(#[source] Box<MemoryLimitError>),
}

impl From<MemoryLimitError> for String {
    fn from(e: MemoryLimitError) -> String {
        e.to_string()
    }
}

/// Parses a size: bytes, or a number with a `K`, `M`, `G` or `T` suffix (powers of 1024; an
/// optional `B` or `iB` after the suffix is accepted), e.g. `8G`, `512MiB`, `1000000`.
pub fn parse_size(text: &str) -> Result<u64, MemoryLimitError> {
    let t = text.trim();
    let bad = || MemoryLimitError::Invalid(text.to_string());
    let upper = t.to_ascii_uppercase();
    let digits_end = upper
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(upper.len());
    let (num, unit) = upper.split_at(digits_end);
    if num.is_empty() {
        return Err(bad());
    }
    let n: u64 = num.parse().map_err(|_| bad())?;
    let shift = match unit.trim_end_matches("IB").trim_end_matches('B') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(bad()),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| MemoryLimitError::TooLarge(text.to_string()))
}

const UNSET: u64 = u64::MAX;
static SET_LIMIT: AtomicU64 = AtomicU64::new(UNSET);
static DEFAULT_LIMIT: OnceLock<Result<(u64, LimitSource), MemoryLimitError>> = OnceLock::new();

/// Sets the process-wide ceiling (`None` goes back to `AXLE_MEMORY_LIMIT` or the system's).
pub fn set_limit(bytes: Option<u64>) {
    SET_LIMIT.store(bytes.map_or(UNSET, |b| b.min(UNSET - 1)), Ordering::Relaxed);
}

/// The ceiling and where it came from; an error when `AXLE_MEMORY_LIMIT` is not a size.
pub fn limit() -> Result<(u64, LimitSource), MemoryLimitError> {
    let set = SET_LIMIT.load(Ordering::Relaxed);
    if set != UNSET {
        return Ok((set, LimitSource::Set));
    }
    DEFAULT_LIMIT
        .get_or_init(|| {
            if let Some(v) = std::env::var_os("AXLE_MEMORY_LIMIT") {
                let text = v.to_string_lossy();
                return parse_size(&text)
                    .map(|n| (n, LimitSource::Environment))
                    .map_err(|e| MemoryLimitError::Environment(Box::new(e)));
            }
            Ok(match system_available() {
                Some(n) => (n, LimitSource::System),
                None => (u64::MAX, LimitSource::None),
            })
        })
        .clone()
}

/// `MemAvailable` from `/proc/meminfo`, in bytes.
fn system_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line
        .trim_start_matches("MemAvailable:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}

/// What one run may hold at once: the ceiling, and the bytes reserved so far.
#[derive(Clone, Debug)]
pub struct MemoryBudget {
    limit: u64,
    source: LimitSource,
    used: u64,
}

impl MemoryBudget {
    /// A budget under the process-wide ceiling ([`limit`]).
    pub fn new() -> Result<MemoryBudget, MemoryLimitError> {
        let (limit, source) = limit()?;
        Ok(MemoryBudget {
            limit,
            source,
            used: 0,
        })
    }

    /// A budget of `limit` bytes.
    pub fn with_limit(limit: u64, source: LimitSource) -> MemoryBudget {
        MemoryBudget {
            limit,
            source,
            used: 0,
        }
    }

    /// The ceiling.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes reserved so far.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Bytes still available.
    pub fn available(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }

    /// Reserves `bytes` for `what` (named lazily), or fails without reserving.
    pub fn reserve(
        &mut self,
        bytes: u64,
        what: impl FnOnce() -> String,
    ) -> Result<(), MemoryError> {
        if bytes > self.available() {
            return Err(MemoryError {
                what: what(),
                needed: bytes,
                available: self.available(),
                source: self.source,
            });
        }
        self.used += bytes;
        Ok(())
    }

    /// Counts `bytes` already held (memory that exists whatever the ceiling, such as data
    /// moved from one value into another), without checking.
    pub fn force(&mut self, bytes: u64) {
        self.used = self.used.saturating_add(bytes);
    }

    /// Gives back `bytes` reserved earlier.
    pub fn release(&mut self, bytes: u64) {
        self.used = self.used.saturating_sub(bytes);
    }

    /// An error for `what` needing `bytes` that the allocator refused.
    pub fn refused(&self, bytes: u64, what: String) -> MemoryError {
        MemoryError {
            what,
            needed: bytes,
            available: self.available(),
            source: self.source,
        }
    }
}

/// `bytes` zero bytes in a `Vec`, allocated fallibly: an allocator refusal is a
/// [`MemoryError`] for `what` instead of an abort.
pub fn try_zeroed(bytes: u64, what: impl FnOnce() -> String) -> Result<Vec<u8>, MemoryError> {
    let refused = |what: String| MemoryError {
        what,
        needed: bytes,
        available: 0,
        source: LimitSource::None,
    };
    let Ok(n) = usize::try_from(bytes) else {
        return Err(refused(what()));
    };
    let mut v = Vec::new();
    if v.try_reserve_exact(n).is_err() {
        return Err(refused(what()));
    }
    v.resize(n, 0);
    Ok(v)
}

/// A `Vec` with room for `n` elements, allocated fallibly (see [`try_zeroed`]).
pub fn try_with_capacity<T>(
    n: usize,
    what: impl FnOnce() -> String,
) -> Result<Vec<T>, MemoryError> {
    let mut v = Vec::new();
    if v.try_reserve_exact(n).is_err() {
        return Err(MemoryError {
            what: what(),
            needed: (n as u64).saturating_mul(std::mem::size_of::<T>() as u64),
            available: 0,
            source: LimitSource::None,
        });
    }
    Ok(v)
}
