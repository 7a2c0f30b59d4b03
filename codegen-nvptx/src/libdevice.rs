//! NVIDIA's libdevice: the device math library (`__nv_tanf`, `__nv_powf`, `__nv_erff`, ...) as
//! LLVM bitcode, linked into a module's kernels for the math functions the shared layer has no
//! inline form of, as XLA does.
//!
//! The bitcode is found at `$AXLE_LIBDEVICE` (set to a path that is not a file, such as
//! `none`, it turns libdevice off), else beside the real location of `$AXLE_PTXAS` (the copy
//! `.ci/deps` installs), else where a CUDA toolkit or pip's `nvidia-cuda-nvcc-cu12` puts it
//! ([`crate::toolkit`]: `$CUDA_HOME`, the `ptxas` on `PATH`, `make deps`'s folder, Python's
//! site packages, `/usr/local/cuda`, Debian's toolkit). It is optional: without it, math
//! functions are the shared layer's inline forms (`axle_codegen_llvm::libm_fallback`).
//!
//! Invariants: only functions libdevice defines are called (the target answers `None` for the
//! rest); after linking, every function but the kernels is internal, so the optimizer keeps
//! only what the kernels call; `nvvm-reflect-ftz` is 0 (subnormals kept, as the kernels' own
//! arithmetic does).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use inkwell::context::Context;
use inkwell::module::{FlagBehavior, Linkage, Module};
use inkwell::targets::{TargetData, TargetTriple};

use crate::NvptxError;

/// The prefix of libdevice's functions: `__nv_` and the C math library's name.
pub const PREFIX: &str = "__nv_";

/// The libdevice bitcode to link, if there is one: `$AXLE_LIBDEVICE` when set (`None` unless
/// it is a file), else the one beside `$AXLE_PTXAS`'s real location, else the first a CUDA
/// toolkit holds ([`crate::toolkit::toolkit_roots`]).
pub fn find_libdevice() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AXLE_LIBDEVICE").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let beside_ptxas = std::env::var_os("AXLE_PTXAS")
        .filter(|p| !p.is_empty())
        .and_then(|p| std::fs::canonicalize(p).ok())
        .and_then(|real| Some(real.parent()?.parent()?.join(RELATIVE[0])))
        .filter(|p| p.is_file());
    beside_ptxas
        .or_else(|| crate::toolkit::find_in_toolkits(&crate::toolkit::process_env, &RELATIVE))
}

/// Where libdevice sits under a toolkit's root: NVIDIA's layout (CUDA and pip), then Debian's.
const RELATIVE: [&str; 2] = [
    "nvvm/libdevice/libdevice.10.bc",
    "libdevice/libdevice.10.bc",
];

/// Loaded libdevice bitcode and the names of the functions it defines.
pub struct Libdevice<'ctx> {
    module: Module<'ctx>,
    /// The functions it defines (`__nv_tanf`, ...).
    pub functions: HashSet<String>,
}

impl<'ctx> Libdevice<'ctx> {
    /// Loads the bitcode at `path` into `ctx`.
    pub fn load(ctx: &'ctx Context, path: &Path) -> Result<Self, NvptxError> {
        let module = Module::parse_bitcode_from_path(path, ctx)
            .map_err(|e| NvptxError::Toolkit(format!("libdevice {}: {e}", path.display())))?;
        let functions = module
            .get_functions()
            .filter(|f| f.count_basic_blocks() > 0)
            .map(|f| f.get_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(PREFIX))
            .collect();
        Ok(Libdevice { module, functions })
    }

    /// Links it into `into` (whose triple and data layout it takes) when `into` calls one of its
    /// functions, then makes every function but `kernels` internal.
    pub fn link_into(
        self,
        into: &Module<'ctx>,
        data: &TargetData,
        triple: &TargetTriple,
        kernels: &[String],
    ) -> Result<(), NvptxError> {
        let calls = into.get_functions().any(|f| {
            f.count_basic_blocks() == 0 && f.get_name().to_string_lossy().starts_with(PREFIX)
        });
        if !calls {
            return Ok(());
        }
        self.module.set_triple(triple);
        self.module.set_data_layout(&data.get_data_layout());
        into.link_in_module(self.module)
            .map_err(|e| NvptxError::Toolkit(format!("linking libdevice: {e}")))?;
        let i32t = into.get_context().i32_type();
        into.add_basic_value_flag(
            "nvvm-reflect-ftz",
            FlagBehavior::Override,
            i32t.const_zero(),
        );
        for f in into.get_functions() {
            let name = f.get_name().to_string_lossy();
            if f.count_basic_blocks() > 0 && !kernels.iter().any(|k| *k == name) {
                f.set_linkage(Linkage::Internal);
            }
        }
        Ok(())
    }
}
