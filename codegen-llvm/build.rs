//! Build script of the shared LLVM layer, the lowest crate that uses LLVM.
//!
//! 1. Finds LLVM 19 and links it, for this workspace and for any crate that depends on Axle
//!    (where `.cargo/config.toml`'s environment does not apply): `LLVM_SYS_191_PREFIX` when set
//!    (its `bin/llvm-config`), else `llvm-config-19` on `PATH`, else an `llvm-config` on `PATH`
//!    that reports version 19, else `/usr/lib/llvm-19/bin/llvm-config`. It links the shared
//!    `libLLVM` when LLVM has one, else the static libraries with their system libraries.
//!    llvm-sys is built with `no-llvm-linking` (and `disable-alltargets-init`, whose C wrappers
//!    would need LLVM's headers), so this is the one place LLVM is found; when it is missing the
//!    build stops here with a message naming what to install.
//! 2. Hands LLVM's version to the build scripts of the crates that depend on this one
//!    (`DEP_AXLE_LLVM_VERSION`, through the `links` key), for their source hashes.

use std::path::{Path, PathBuf};
use std::process::Command;

const PREFIX_VAR: &str = "LLVM_SYS_191_PREFIX";

fn main() {
    println!("cargo:rerun-if-env-changed={PREFIX_VAR}");
    println!("cargo:rerun-if-env-changed=PATH");
    println!("cargo:rerun-if-changed=build.rs");
    let config = find_llvm_config().unwrap_or_else(|tried| {
        panic!(
            "\n\nAxle needs LLVM 19 (its development files) and could not find it.\n\
             Tried: {}.\n\
             Install it, e.g. on Debian/Ubuntu: `apt-get install llvm-19-dev` (LLVM's apt \
             repository at https://apt.llvm.org has it for older releases), or point \
             {PREFIX_VAR} at an LLVM 19 installation (the directory holding bin/llvm-config).\n\n",
            tried.join(", ")
        )
    });
    let version = llvm_config(&config, &["--version"]).unwrap_or_default();
    link_llvm(&config);
    println!("cargo:version={version}");
}

/// The first llvm-config of LLVM 19, or the candidates tried.
fn find_llvm_config() -> Result<PathBuf, Vec<String>> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os(PREFIX_VAR).filter(|p| !p.is_empty()) {
        // As llvm-sys does: a prefix that is set is the only place looked at.
        candidates.push(Path::new(&p).join("bin").join("llvm-config"));
    } else {
        candidates.push("llvm-config-19".into());
        candidates.push("llvm-config".into());
        candidates.push("/usr/lib/llvm-19/bin/llvm-config".into());
    }
    let mut tried = Vec::new();
    for c in candidates {
        match llvm_config(&c, &["--version"]) {
            Some(v) if v.starts_with("19.") => return Ok(c),
            Some(v) => tried.push(format!("{} (LLVM {v})", c.display())),
            None => tried.push(format!("{} (not found)", c.display())),
        }
    }
    Err(tried)
}

fn llvm_config(config: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(config).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn link_llvm(config: &Path) {
    let get = |args: &[&str]| {
        llvm_config(config, args)
            .unwrap_or_else(|| panic!("`{} {}` failed", config.display(), args.join(" ")))
    };
    let libdir = get(&["--libdir"]);
    println!("cargo:rustc-link-search=native={libdir}");
    let shared = llvm_config(config, &["--link-shared", "--libs"]).filter(|s| !s.is_empty());
    let (libs, kind, system) = match shared {
        Some(libs) => (libs, "dylib", get(&["--link-shared", "--system-libs"])),
        None => (
            get(&["--link-static", "--libs"]),
            "static",
            get(&["--link-static", "--system-libs"]),
        ),
    };
    for l in libs.split_whitespace() {
        if let Some(name) = l.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={kind}={name}");
        }
    }
    for l in system.split_whitespace() {
        if let Some(name) = l.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={name}");
        }
    }
    if kind == "static" {
        // LLVM's static libraries are C++.
        println!("cargo:rustc-link-lib=dylib=stdc++");
    }
}
