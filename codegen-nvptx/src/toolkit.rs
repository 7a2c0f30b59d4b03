//! Where NVIDIA's tools are found on a machine: the folders that may hold a CUDA toolkit's
//! `bin/ptxas` and `nvvm/libdevice/libdevice.10.bc`, in the order they are searched.
//!
//! The order: `$CUDA_HOME`, `$CUDA_PATH`, `$CUDA_ROOT`; the toolkit that holds the `ptxas` on
//! `PATH` (its real location, two levels up); the copy of pip's `nvidia-cuda-nvcc-cu12` that
//! `make deps` installs (`$AXLE_TOOLS/cuda-nvcc-*`, by default under `$XDG_CACHE_HOME/axle` or
//! `~/.cache/axle`); pip's package in the active virtual environment, the user's site
//! packages and the system's (`nvidia/cuda_nvcc` under `site-packages` or `dist-packages`);
//! `/usr/local/cuda` and the newest `/usr/local/cuda-*`; Debian's `nvidia-cuda-toolkit`
//! (`/usr/lib/nvidia-cuda-toolkit`, whose libdevice sits at `libdevice/` rather than
//! `nvvm/libdevice/`).
//!
//! Invariants: the search reads the environment only through the lookup it is given, so it
//! is a function of that lookup and the file system; a candidate is returned only where the
//! file exists; nothing is run or written.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The folders that may be a CUDA toolkit's root (holding `bin/` and `nvvm/`), in search
/// order, with `env` looking up environment variables. Folders that do not exist are left
/// out; a folder may appear more than once.
pub fn toolkit_roots(env: &dyn Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let var = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let mut roots: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"]
        .iter()
        .filter_map(|v| var(v))
        .collect();
    if let Some(path) = env("PATH") {
        for dir in std::env::split_paths(&path) {
            let ptxas = dir.join("ptxas");
            if let Some(root) = real_root_of_tool(&ptxas) {
                roots.push(root);
            }
        }
    }
    let tools = var("AXLE_TOOLS").or_else(|| {
        var("XDG_CACHE_HOME")
            .or_else(|| var("HOME").map(|h| h.join(".cache")))
            .map(|c| c.join("axle"))
    });
    if let Some(tools) = tools {
        for dir in sorted_children(&tools, "cuda-nvcc-") {
            if let Some(root) = real_root_of_tool(&dir.join("ptxas")) {
                roots.push(root);
            }
        }
    }
    let mut sites = Vec::new();
    if let Some(venv) = var("VIRTUAL_ENV") {
        sites.extend(site_packages(&venv.join("lib")));
    }
    if let Some(home) = var("HOME") {
        sites.extend(site_packages(&home.join(".local/lib")));
    }
    sites.extend(site_packages(Path::new("/usr/local/lib")));
    sites.extend(site_packages(Path::new("/usr/lib")));
    roots.extend(sites.into_iter().map(|s| s.join("nvidia/cuda_nvcc")));
    roots.push(PathBuf::from("/usr/local/cuda"));
    roots.extend(
        sorted_children(Path::new("/usr/local"), "cuda-")
            .into_iter()
            .rev(),
    );
    roots.push(PathBuf::from("/usr/lib/nvidia-cuda-toolkit"));
    roots.retain(|r| r.is_dir());
    roots
}

/// The first file among `relative` paths under the toolkit roots, as [`toolkit_roots`]
/// orders them.
pub fn find_in_toolkits(
    env: &dyn Fn(&str) -> Option<OsString>,
    relative: &[&str],
) -> Option<PathBuf> {
    toolkit_roots(env)
        .into_iter()
        .flat_map(|root| relative.iter().map(move |r| root.join(r)))
        .find(|p| p.is_file())
}

/// The process's environment as a lookup for [`toolkit_roots`].
pub fn process_env(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

/// The toolkit root of a tool at `bin/NAME` (following links to its real location), where the
/// tool exists.
fn real_root_of_tool(tool: &Path) -> Option<PathBuf> {
    if !tool.is_file() {
        return None;
    }
    let real = std::fs::canonicalize(tool).ok()?;
    Some(real.parent()?.parent()?.to_path_buf())
}

/// The entries of `dir` whose names start with `prefix`, sorted by name.
fn sorted_children(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

/// The `site-packages` and `dist-packages` folders under `lib` (`lib/python3.*/...`, and
/// `lib/python3/dist-packages`), sorted.
fn site_packages(lib: &Path) -> Vec<PathBuf> {
    sorted_children(lib, "python3")
        .into_iter()
        .flat_map(|p| [p.join("site-packages"), p.join("dist-packages")])
        .filter(|p| p.is_dir())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(vars: &[(&str, &Path)]) -> impl Fn(&str) -> Option<OsString> {
        let m: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_os_str().to_owned()))
            .collect();
        move |k| m.get(k).cloned()
    }

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"x").unwrap();
    }

    #[test]
    fn cuda_home_comes_first_and_the_file_must_exist() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        let b = d.path().join("b");
        touch(&b.join("nvvm/libdevice/libdevice.10.bc"));
        std::fs::create_dir_all(&a).unwrap();
        let env = lookup(&[("CUDA_HOME", &a), ("CUDA_PATH", &b)]);
        let roots = toolkit_roots(&env);
        assert_eq!(&roots[..2], &[a.clone(), b.clone()]);
        let found = find_in_toolkits(&env, &["nvvm/libdevice/libdevice.10.bc"]);
        assert_eq!(found, Some(b.join("nvvm/libdevice/libdevice.10.bc")));
    }

    #[test]
    fn the_copy_make_deps_installs_is_found_through_its_link() {
        let d = tempfile::tempdir().unwrap();
        let pkg = d
            .path()
            .join("venv/lib/python3.12/site-packages/nvidia/cuda_nvcc");
        touch(&pkg.join("bin/ptxas"));
        touch(&pkg.join("nvvm/libdevice/libdevice.10.bc"));
        let tools = d.path().join("tools");
        std::fs::create_dir_all(tools.join("cuda-nvcc-12.9.86")).unwrap();
        std::os::unix::fs::symlink(pkg.join("bin/ptxas"), tools.join("cuda-nvcc-12.9.86/ptxas"))
            .unwrap();
        let env = lookup(&[("AXLE_TOOLS", &tools)]);
        let found = find_in_toolkits(&env, &["nvvm/libdevice/libdevice.10.bc"]);
        let want = std::fs::canonicalize(pkg.join("nvvm/libdevice/libdevice.10.bc")).unwrap();
        assert_eq!(found, Some(want));
    }

    #[test]
    fn a_pip_package_in_the_active_environment_is_found() {
        let d = tempfile::tempdir().unwrap();
        let venv = d.path().join("env");
        let bc = venv
            .join("lib/python3.11/site-packages/nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc");
        touch(&bc);
        let env = lookup(&[("VIRTUAL_ENV", &venv)]);
        assert_eq!(
            find_in_toolkits(&env, &["nvvm/libdevice/libdevice.10.bc"]),
            Some(bc)
        );
    }

    #[test]
    fn ptxas_on_path_names_its_toolkit() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("cuda-12");
        touch(&root.join("bin/ptxas"));
        touch(&root.join("nvvm/libdevice/libdevice.10.bc"));
        let path = std::env::join_paths([d.path().join("nothing"), root.join("bin")]).unwrap();
        let env = move |k: &str| (k == "PATH").then(|| path.clone());
        let roots = toolkit_roots(&env);
        assert_eq!(roots.first(), Some(&std::fs::canonicalize(&root).unwrap()));
    }
}
