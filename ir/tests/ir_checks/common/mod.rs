//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::io::Read;
use std::path::PathBuf;

/// The shared reference data directory: `$AXLE_SHARED`, else `../shared` beside the repository.
pub fn shared_dir() -> PathBuf {
    if let Ok(p) = std::env::var("AXLE_SHARED") {
        return PathBuf::from(p);
    }
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let beside = repo.join("../shared");
    if beside.exists() {
        return beside;
    }
    PathBuf::from("/work/shared")
}

/// Reads a text file, gunzipping `.gz` files.
pub fn read_text(path: &std::path::Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    if path.extension().is_some_and(|e| e == "gz") {
        let mut s = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut s)
            .unwrap_or_else(|e| panic!("gunzip {}: {e}", path.display()));
        s
    } else {
        String::from_utf8(bytes).expect("utf-8")
    }
}

/// Every HLO file of the corpus (`.hlo`, `.opt.hlo`, `.debug.hlo`) and the baseline (`.hlo`,
/// `.hlo.gz`), sorted.
pub fn all_hlo_files() -> Vec<PathBuf> {
    let shared = shared_dir();
    let mut files = Vec::new();
    for sub in ["corpus", "baseline"] {
        let dir = shared.join(sub);
        let rd = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for e in rd {
            let p = e.unwrap().path();
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            if n.ends_with(".hlo") || n.ends_with(".hlo.gz") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}
