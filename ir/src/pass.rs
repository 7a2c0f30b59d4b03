//! Passes: the [`Pass`] trait, the context a pass runs in ([`PassCx`]), typed pass options, the
//! analysis cache and the registry of named passes.
//!
//! A pass is a value that rewrites a module in place and says whether it changed anything. It
//! gets a [`PassCx`] for its counters (one JSON-lines stats row per run carries them) and for
//! analyses cached by the module's epoch. Everything else (timing, verification, dumping,
//! compaction, statistics) belongs to the [`crate::pass_manager::PassManager`].
//!
//! Passes are created by name from a [`PassRegistry`], which also holds each pass's one-line doc
//! and its typed options ([`OptSpec`]); the pipeline grammar ([`crate::pipeline`]) refers to
//! passes and options by these names.

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::Arc;

use crate::module::Module;

/// Whether a pass changed the module.
pub type Changed = bool;

/// A pass failure (a bug or an unsupported input), with a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassError {
    /// What went wrong.
    pub message: String,
}

impl PassError {
    /// An error with `message`.
    pub fn new(message: impl Into<String>) -> PassError {
        PassError {
            message: message.into(),
        }
    }
}

impl fmt::Display for PassError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PassError {}

/// A module-to-module transformation.
///
/// The expected shape of `run` (DESIGN §3): a parallel read phase over `&Module` producing an
/// ordered plan, then a sequential write phase applying it through a [`crate::Rewriter`]. The
/// result must be the same at any thread count, and `Ok(false)` must mean the module is unchanged
/// (debug builds check this by hashing the module).
pub trait Pass: Send {
    /// Runs the pass on `m`.
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError>;
}

/// Named counters of one pass run, in first-use order (printed sorted by name).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    entries: Vec<(&'static str, u64)>,
}

impl Counters {
    /// Adds `n` to counter `name`.
    pub fn add(&mut self, name: &'static str, n: u64) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.0 == name) {
            e.1 += n;
        } else {
            self.entries.push((name, n));
        }
    }

    /// The value of counter `name` (0 if never counted).
    pub fn get(&self, name: &str) -> u64 {
        self.entries.iter().find(|e| e.0 == name).map_or(0, |e| e.1)
    }

    /// Every counter, sorted by name.
    pub fn sorted(&self) -> Vec<(&'static str, u64)> {
        let mut v = self.entries.clone();
        v.sort_by(|a, b| a.0.cmp(b.0));
        v
    }

    /// Whether no counter was touched.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// An analysis: a value derived from a module, cached by [`PassCx::analysis`] until the module's
/// epoch moves on.
pub trait Analysis: Any + Send + Sync + Sized {
    /// Computes the analysis.
    fn compute(m: &Module) -> Self;
}

type CachedAnalysis = (TypeId, u64, Arc<dyn Any + Send + Sync>);

/// Analyses cached by type and tagged with the epoch they were computed at.
#[derive(Default)]
pub struct AnalysisCache {
    entries: Vec<CachedAnalysis>,
    hits: u64,
    misses: u64,
}

impl AnalysisCache {
    /// An empty cache.
    pub fn new() -> AnalysisCache {
        AnalysisCache::default()
    }

    /// The analysis `A` of `m`, computed now unless cached at `m`'s current epoch.
    pub fn get<A: Analysis>(&mut self, m: &Module) -> Arc<A> {
        let tid = TypeId::of::<A>();
        let epoch = m.epoch();
        if let Some(e) = self.entries.iter().find(|e| e.0 == tid && e.1 == epoch) {
            if let Ok(a) = Arc::clone(&e.2).downcast::<A>() {
                self.hits += 1;
                return a;
            }
        }
        self.misses += 1;
        let a = Arc::new(A::compute(m));
        self.entries.retain(|e| e.0 != tid);
        self.entries.push((tid, epoch, a.clone()));
        a
    }

    /// Drops every entry computed before `epoch`.
    pub fn invalidate_before(&mut self, epoch: u64) {
        self.entries.retain(|e| e.1 >= epoch);
    }

    /// (hits, misses) so far.
    pub fn hit_counts(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }

    /// The number of cached entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// What a running pass can use besides the module: counters and the analysis cache.
pub struct PassCx<'a> {
    counters: &'a mut Counters,
    analyses: &'a mut AnalysisCache,
    iteration: u32,
}

impl<'a> PassCx<'a> {
    /// A context writing to `counters` and caching in `analyses`; `iteration` is the fixed-point
    /// iteration (0 outside `fixpoint` groups).
    pub fn new(
        counters: &'a mut Counters,
        analyses: &'a mut AnalysisCache,
        iteration: u32,
    ) -> PassCx<'a> {
        PassCx {
            counters,
            analyses,
            iteration,
        }
    }

    /// Adds `n` to counter `name` of this run.
    pub fn count(&mut self, name: &'static str, n: u64) {
        if n > 0 {
            self.counters.add(name, n);
        }
    }

    /// The analysis `A` of `m`, from the cache when `m` has not changed since it was computed.
    pub fn analysis<A: Analysis>(&mut self, m: &Module) -> Arc<A> {
        self.analyses.get::<A>(m)
    }

    /// The fixed-point iteration this run belongs to (0 outside `fixpoint` groups).
    pub fn iteration(&self) -> u32 {
        self.iteration
    }

    /// The counters so far.
    pub fn counters(&self) -> &Counters {
        self.counters
    }
}

/// Runs `pass` once on `m` with throw-away counters and analyses (for tests and one-off uses;
/// pipelines go through the pass manager). Returns whether it changed `m` and its counters.
pub fn run_pass(pass: &mut dyn Pass, m: &mut Module) -> Result<(Changed, Counters), PassError> {
    let mut counters = Counters::default();
    let mut analyses = AnalysisCache::new();
    let mut cx = PassCx::new(&mut counters, &mut analyses, 0);
    let changed = pass.run(m, &mut cx)?;
    Ok((changed, counters))
}

/// The type of a pass option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptKind {
    /// An integer in `min..=max`.
    Int {
        /// Smallest allowed value.
        min: i64,
        /// Largest allowed value.
        max: i64,
    },
    /// `true` or `false`.
    Bool,
    /// One of the listed words.
    Choice(&'static [&'static str]),
    /// Any word.
    Str,
}

impl fmt::Display for OptKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptKind::Int { min, max } if *max == i64::MAX => write!(f, "int >= {min}"),
            OptKind::Int { min, max } => write!(f, "int in {min}..={max}"),
            OptKind::Bool => f.write_str("bool"),
            OptKind::Choice(c) => write!(f, "one of {}", c.join("|")),
            OptKind::Str => f.write_str("string"),
        }
    }
}

/// One typed option of a pass.
#[derive(Clone, Copy, Debug)]
pub struct OptSpec {
    /// The option's name (`max_elements`).
    pub name: &'static str,
    /// Its type.
    pub kind: OptKind,
    /// Its default value, as it would be written in a pipeline.
    pub default: &'static str,
    /// A one-line description.
    pub doc: &'static str,
}

/// A typed option value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OptValue {
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// A word (choices and strings).
    Str(String),
}

impl fmt::Display for OptValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptValue::Int(v) => write!(f, "{v}"),
            OptValue::Bool(v) => write!(f, "{v}"),
            OptValue::Str(v) => f.write_str(v),
        }
    }
}

impl OptSpec {
    /// Parses `text` as a value of this option.
    pub fn parse_value(&self, text: &str) -> Result<OptValue, PassOptionError> {
        match self.kind {
            OptKind::Int { min, max } => {
                let v: i64 = text.parse().map_err(|_| PassOptionError::NotAnInteger {
                    option: self.name,
                    found: text.to_string(),
                })?;
                if v < min || v > max {
                    return Err(PassOptionError::OutOfRange {
                        option: self.name,
                        kind: self.kind,
                        found: v,
                    });
                }
                Ok(OptValue::Int(v))
            }
            OptKind::Bool => match text {
                "true" | "1" => Ok(OptValue::Bool(true)),
                "false" | "0" => Ok(OptValue::Bool(false)),
                _ => Err(PassOptionError::NotABool {
                    option: self.name,
                    found: text.to_string(),
                }),
            },
            OptKind::Choice(choices) => {
                if choices.contains(&text) {
                    Ok(OptValue::Str(text.to_string()))
                } else {
                    Err(PassOptionError::NotAChoice {
                        option: self.name,
                        choices,
                        found: text.to_string(),
                    })
                }
            }
            OptKind::Str => Ok(OptValue::Str(text.to_string())),
        }
    }
}

/// Why a pass or its options are refused ([`OptSpec::parse_value`], [`PassOptions::resolve`],
/// [`PassRegistry::create`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PassOptionError {
    /// An integer option given a word that is no integer.
    #[error("option '{option}' takes an integer, found '{found}'")]
    NotAnInteger {
        /// The option.
        option: &'static str,
        /// The text given.
        found: String,
    },
    /// An integer option given a value outside its range.
    #[error("option '{option}' must be an {kind}, found {found}")]
    OutOfRange {
        /// The option.
        option: &'static str,
        /// Its type (with the range).
        kind: OptKind,
        /// The value given.
        found: i64,
    },
    /// A boolean option given something else.
    #[error("option '{option}' takes true or false, found '{found}'")]
    NotABool {
        /// The option.
        option: &'static str,
        /// The text given.
        found: String,
    },
    /// A choice option given a word it does not list.
    #[error("option '{option}' must be one of {}, found '{found}'", .choices.join("|"))]
    NotAChoice {
        /// The option.
        option: &'static str,
        /// The words it takes.
        choices: &'static [&'static str],
        /// The text given.
        found: String,
    },
    /// An option's declared default does not parse (a bug in the pass's spec).
    #[error("bad default: {0}")]
    BadDefault(Box<PassOptionError>),
    /// An option the pass does not have.
    #[error("unknown option '{option}' ({})", known_options(.known))]
    Unknown {
        /// The option given.
        option: String,
        /// The pass's options.
        known: Vec<&'static str>,
    },
    /// An option given twice.
    #[error("option '{0}' is given twice")]
    GivenTwice(String),
    /// A pass name the registry does not have.
    #[error("unknown pass '{0}'")]
    UnknownPass(String),
}

/// What an unknown-option message says of the options a pass has.
fn known_options(known: &[&str]) -> String {
    if known.is_empty() {
        "this pass takes no options".to_string()
    } else {
        format!("options: {}", known.join(", "))
    }
}

impl From<PassOptionError> for String {
    fn from(e: PassOptionError) -> String {
        e.to_string()
    }
}

/// The resolved options of one pass instance: every option of its spec, given or defaulted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassOptions {
    values: Vec<(&'static str, OptValue, bool)>,
}

impl PassOptions {
    /// Options from `specs`, with the given `(name, text)` pairs overriding the defaults.
    pub fn resolve(
        specs: &[OptSpec],
        given: &[(String, String)],
    ) -> Result<PassOptions, PassOptionError> {
        let mut values = Vec::with_capacity(specs.len());
        for s in specs {
            let v = s
                .parse_value(s.default)
                .map_err(|e| PassOptionError::BadDefault(Box::new(e)))?;
            values.push((s.name, v, false));
        }
        for (k, v) in given {
            let Some(i) = specs.iter().position(|s| s.name == k) else {
                return Err(PassOptionError::Unknown {
                    option: k.clone(),
                    known: specs.iter().map(|s| s.name).collect(),
                });
            };
            if values[i].2 {
                return Err(PassOptionError::GivenTwice(k.clone()));
            }
            values[i] = (specs[i].name, specs[i].parse_value(v)?, true);
        }
        Ok(PassOptions { values })
    }

    /// The integer option `name`.
    ///
    /// # Panics
    ///
    /// If the pass's spec has no integer option `name` (a bug in the pass).
    pub fn int(&self, name: &str) -> i64 {
        match self.values.iter().find(|v| v.0 == name) {
            Some((_, OptValue::Int(v), _)) => *v,
            _ => panic!("pass option '{name}' is not an integer option of this pass"),
        }
    }

    /// The boolean option `name`.
    ///
    /// # Panics
    ///
    /// If the pass's spec has no boolean option `name` (a bug in the pass).
    pub fn bool(&self, name: &str) -> bool {
        match self.values.iter().find(|v| v.0 == name) {
            Some((_, OptValue::Bool(v), _)) => *v,
            _ => panic!("pass option '{name}' is not a boolean option of this pass"),
        }
    }

    /// The word option `name` (choices and strings).
    ///
    /// # Panics
    ///
    /// If the pass's spec has no such option (a bug in the pass).
    pub fn str(&self, name: &str) -> &str {
        match self.values.iter().find(|v| v.0 == name) {
            Some((_, OptValue::Str(v), _)) => v,
            _ => panic!("pass option '{name}' is not a word option of this pass"),
        }
    }

    /// The options given explicitly, in spec order, as `(name, value)`: what the canonical
    /// pipeline text prints.
    pub fn explicit(&self) -> Vec<(&'static str, &OptValue)> {
        self.values
            .iter()
            .filter(|v| v.2)
            .map(|v| (v.0, &v.1))
            .collect()
    }
}

/// Creates a pass from its resolved options.
pub type PassFactory = fn(&PassOptions) -> Box<dyn Pass>;

/// A registered pass: name, one-line doc, typed options and a factory.
#[derive(Clone, Copy)]
pub struct PassInfo {
    /// The name pipelines use (`algsimp`).
    pub name: &'static str,
    /// A one-line description.
    pub doc: &'static str,
    /// The options it takes.
    pub options: &'static [OptSpec],
    /// Creates an instance.
    pub create: PassFactory,
}

impl fmt::Debug for PassInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PassInfo")
            .field("name", &self.name)
            .field("doc", &self.doc)
            .finish()
    }
}

/// Every pass available to pipelines, by name.
#[derive(Clone, Debug, Default)]
pub struct PassRegistry {
    passes: Vec<PassInfo>,
}

/// Names the pipeline grammar reserves (they cannot name passes).
pub const RESERVED_NAMES: &[&str] = &["fixpoint"];

impl PassRegistry {
    /// An empty registry.
    pub fn new() -> PassRegistry {
        PassRegistry::default()
    }

    /// Adds a pass.
    ///
    /// # Panics
    ///
    /// If the name is taken, reserved, or not made of `[a-z0-9_-]`, or an option's default does
    /// not parse (registration bugs, caught by any test that builds the registry).
    pub fn register(&mut self, info: PassInfo) {
        assert!(
            !info.name.is_empty()
                && info.name.bytes().all(|b| b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || b == b'-'
                    || b == b'_'),
            "pass name '{}' must be made of [a-z0-9_-]",
            info.name
        );
        assert!(
            !RESERVED_NAMES.contains(&info.name),
            "pass name '{}' is reserved",
            info.name
        );
        assert!(
            self.get(info.name).is_none(),
            "pass '{}' is registered twice",
            info.name
        );
        if let Err(e) = PassOptions::resolve(info.options, &[]) {
            panic!("pass '{}': {e}", info.name);
        }
        self.passes.push(info);
    }

    /// The pass named `name`.
    pub fn get(&self, name: &str) -> Option<&PassInfo> {
        self.passes.iter().find(|p| p.name == name)
    }

    /// Every pass, sorted by name.
    pub fn passes(&self) -> Vec<&PassInfo> {
        let mut v: Vec<&PassInfo> = self.passes.iter().collect();
        v.sort_by_key(|p| p.name);
        v
    }

    /// Every pass name, sorted.
    pub fn names(&self) -> Vec<&'static str> {
        self.passes().into_iter().map(|p| p.name).collect()
    }

    /// Creates the pass `name` with options given as text pairs.
    pub fn create(
        &self,
        name: &str,
        options: &[(String, String)],
    ) -> Result<(Box<dyn Pass>, PassOptions), PassOptionError> {
        let info = self
            .get(name)
            .ok_or_else(|| PassOptionError::UnknownPass(name.to_string()))?;
        let opts = PassOptions::resolve(info.options, options)?;
        Ok(((info.create)(&opts), opts))
    }

    /// A table of every pass with its doc and options, as `axle passes` prints it.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        let width = self.passes.iter().map(|p| p.name.len()).max().unwrap_or(0);
        for p in self.passes() {
            out.push_str(&format!("{:<width$}  {}\n", p.name, p.doc));
            for o in p.options {
                out.push_str(&format!(
                    "{:<width$}    {}={} ({}): {}\n",
                    "", o.name, o.default, o.kind, o.doc
                ));
            }
        }
        out
    }
}
