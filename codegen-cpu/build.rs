//! Build script of the CPU backend: sets `AXLE_CODEGEN_CPU_SOURCE_HASH`, a hash of the sources
//! (and manifests) of this crate and of every workspace crate it depends on, directly or not
//! (`axle-ir` is the sibling directory `ir`, ...), plus the LLVM version the shared LLVM layer
//! found (`DEP_AXLE_LLVM_VERSION`, from `axle-codegen-llvm`'s build script, which also links
//! LLVM), so the compilation cache never loads code compiled by another build.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=DEP_AXLE_LLVM_VERSION");
    let version = std::env::var("DEP_AXLE_LLVM_VERSION").unwrap_or_default();
    source_hash(&version);
}

fn source_hash(llvm_version: &str) {
    let here = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let mut h = DefaultHasher::new();
    llvm_version.hash(&mut h);
    let mut crates = vec![here.clone()];
    workspace_deps(&here, &mut crates);
    for c in &crates {
        let src = c.join("src");
        println!("cargo:rerun-if-changed={}", src.display());
        println!("cargo:rerun-if-changed={}", c.join("Cargo.toml").display());
        let mut files = vec![c.join("Cargo.toml")];
        walk(&src, &mut files);
        files.sort();
        for f in files {
            f.strip_prefix(c).unwrap_or(&f).hash(&mut h);
            std::fs::read(&f).unwrap_or_default().hash(&mut h);
        }
    }
    println!(
        "cargo:rustc-env=AXLE_CODEGEN_CPU_SOURCE_HASH={:016x}",
        h.finish()
    );
}

/// The directories of the workspace crates `dir`'s crate depends on, transitively: a
/// `[dependencies]` entry `axle-NAME` is the sibling directory `NAME` when it exists (a
/// published build has none, and its crate versions say everything).
fn workspace_deps(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(toml) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
        return;
    };
    let mut in_deps = false;
    for line in toml.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        let Some(rest) = line.strip_prefix("axle-").filter(|_| in_deps) else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        let Some(parent) = dir.parent() else { continue };
        let d = parent.join(&name);
        if d.join("Cargo.toml").is_file() && !out.contains(&d) {
            out.push(d.clone());
            workspace_deps(&d, out);
        }
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}
