//! The compilation cache: compiled code kept on disk between compilations and processes, as
//! JAX's persistent compilation cache does, so compiling a module a second time skips code
//! generation. Backends decide what a key covers and what an entry holds (`cpu`: the module's
//! fingerprint, the options, the backend version and the CPU's name and features; an object
//! file and the facts to run it); this file stores and checks entries.
//!
//! Layout: one file per key, `DIR/<backend>/<64 hex digits>.axc`, holding the magic `AXLECACHE1`,
//! the 32-byte key, the payload's length (`u64`, little-endian), its SHA-256 and the payload.
//!
//! Invariants:
//! - Safe under concurrent processes: an entry is written to a temporary file in the same
//!   directory and renamed into place, so a reader sees a whole entry or none; two writers of
//!   one key both write whole entries and the last rename wins.
//! - Survives corrupt entries: a file whose magic, key, length or checksum is wrong is removed
//!   and reported as a miss, and the caller compiles as if there were no entry.
//! - Errors writing an entry never fail a compilation ([`DiskCache::put`] reports them; callers
//!   go on with the code they compiled).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

const MAGIC: &[u8; 10] = b"AXLECACHE1";
const HEADER: usize = MAGIC.len() + 32 + 8 + 32;

/// A cache key: the SHA-256 of everything that determines the compiled code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey([u8; 32]);

impl CacheKey {
    /// The key of `parts`, each length-prefixed so that no two lists of parts collide by
    /// concatenation.
    pub fn new(parts: &[&[u8]]) -> CacheKey {
        let mut h = Sha256::new();
        for p in parts {
            h.update((p.len() as u64).to_le_bytes());
            h.update(p);
        }
        CacheKey(h.finalize().into())
    }

    /// The key as 64 lowercase hex digits.
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// What a compilation did with the cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CacheOutcome {
    /// No cache was used.
    #[default]
    Off,
    /// The compiled code came from the cache.
    Hit,
    /// There was no entry (or a corrupt one, now removed); the module was compiled and its entry
    /// written (`stored`) or not (the directory is not writable, ...).
    Miss {
        /// Whether the new entry was written.
        stored: bool,
    },
}

/// Cache entries in a directory, one subdirectory per backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskCache {
    dir: PathBuf,
}

impl DiskCache {
    /// The cache in `dir` (created when the first entry is written).
    pub fn new(dir: impl Into<PathBuf>) -> DiskCache {
        DiskCache { dir: dir.into() }
    }

    /// Where the command-line tool keeps its cache: `AXLE_CACHE_DIR` when set, else
    /// `$XDG_CACHE_HOME/axle`, else `$HOME/.cache/axle`, else `axle-cache` in the temporary
    /// directory.
    pub fn default_dir() -> PathBuf {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        if let Some(d) = var("AXLE_CACHE_DIR") {
            return d;
        }
        if let Some(d) = var("XDG_CACHE_HOME") {
            return d.join("axle");
        }
        if let Some(h) = var("HOME") {
            return h.join(".cache").join("axle");
        }
        std::env::temp_dir().join("axle-cache")
    }

    /// The cache's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of `key` for `backend`.
    pub fn path(&self, backend: &str, key: &CacheKey) -> PathBuf {
        self.dir.join(backend).join(format!("{}.axc", key.hex()))
    }

    /// The payload stored for `key`, if there is a sound entry; a corrupt entry is removed.
    pub fn get(&self, backend: &str, key: &CacheKey) -> Option<Vec<u8>> {
        let path = self.path(backend, key);
        let bytes = std::fs::read(&path).ok()?;
        match check_entry(&bytes, key) {
            Some(range) => Some(bytes[range].to_vec()),
            None => {
                // Another process may have replaced it meanwhile; removing a sound new entry
                // only costs that process a recompilation.
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Stores `payload` for `key`: written to a temporary file beside the entry, then renamed
    /// over it.
    pub fn put(&self, backend: &str, key: &CacheKey, payload: &[u8]) -> std::io::Result<()> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = self.path(backend, key);
        let dir = path.parent().expect("an entry path has a directory");
        std::fs::create_dir_all(dir)?;
        let tmp = dir.join(format!(
            ".tmp-{}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            key.hex()
        ));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(MAGIC)?;
            f.write_all(&key.0)?;
            f.write_all(&(payload.len() as u64).to_le_bytes())?;
            f.write_all(&Sha256::digest(payload))?;
            f.write_all(payload)?;
            f.flush()?;
            std::fs::rename(&tmp, &path)
        };
        let r = write();
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r
    }
}

/// The payload's byte range in a sound entry for `key`.
fn check_entry(bytes: &[u8], key: &CacheKey) -> Option<std::ops::Range<usize>> {
    if bytes.len() < HEADER || &bytes[..MAGIC.len()] != MAGIC {
        return None;
    }
    let k = MAGIC.len();
    if bytes[k..k + 32] != key.0 {
        return None;
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&bytes[k + 32..k + 40]);
    let len = u64::from_le_bytes(len);
    if (bytes.len() - HEADER) as u64 != len {
        return None;
    }
    let payload = &bytes[HEADER..];
    if Sha256::digest(payload).as_slice() != &bytes[k + 40..HEADER] {
        return None;
    }
    Some(HEADER..bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let c = DiskCache::new(dir.path());
        let k = CacheKey::new(&[b"module", b"options"]);
        assert_ne!(k, CacheKey::new(&[b"moduleoptions"]));
        assert_eq!(c.get("cpu", &k), None);
        c.put("cpu", &k, b"payload").unwrap();
        assert_eq!(c.get("cpu", &k).as_deref(), Some(&b"payload"[..]));
        // Flip one payload byte: the checksum catches it, the entry goes away.
        let p = c.path("cpu", &k);
        let mut bytes = std::fs::read(&p).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        std::fs::write(&p, &bytes).unwrap();
        assert_eq!(c.get("cpu", &k), None);
        assert!(!p.exists());
        // A truncated entry and an entry of another key are misses too.
        c.put("cpu", &k, b"payload").unwrap();
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 1]).unwrap();
        assert_eq!(c.get("cpu", &k), None);
        let k2 = CacheKey::new(&[b"other"]);
        c.put("cpu", &k2, b"x").unwrap();
        std::fs::copy(c.path("cpu", &k2), &p).unwrap();
        assert_eq!(c.get("cpu", &k), None);
        // No temporary files are left behind.
        let names: Vec<String> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.starts_with(".tmp")), "{names:?}");
    }
}
