//! Programs in: a `PJRT_Program`'s code and format become a verified Axle [`Module`].
//!
//! - Format `"mlir"` (what JAX sends: a StableHLO portable artifact, VHLO bytecode, or MLIR
//!   text) goes through the converter the host process registered with
//!   [`set_mlir_converter`]: the `axle` Python package registers one that calls the jaxlib of
//!   the calling process (`deserialize_portable_artifact`, then
//!   `mlir_module_to_xla_computation`) and hands back a serialized `HloModuleProto`, so the
//!   plugin reads exactly the StableHLO versions that jaxlib writes and needs no MLIR of its own.
//!   Without one (a client that is not a Python process), format "mlir" is an error saying so.
//! - Format `"hlo"` (a serialized `HloModuleProto`, what PyTorch/XLA and other clients send) is
//!   read natively ([`axle_hlo_proto::read_module`]); `"hlo_text"` is HLO text.
//!
//! Invariant: whatever the bytes, the outcome is a module that passed the verifier or an error;
//! a converter that panics or fails is an error naming the format.

use std::sync::OnceLock;

use axle::ir::Module;

use crate::error::{PluginError, PluginResult};

/// Turns an `"mlir"` program's bytes into a serialized `HloModuleProto`.
pub type MlirConverter = dyn Fn(&[u8]) -> Result<Vec<u8>, String> + Send + Sync;

static MLIR: OnceLock<Box<MlirConverter>> = OnceLock::new();

/// Registers the converter of format `"mlir"`; the first registration wins.
pub fn set_mlir_converter(f: Box<MlirConverter>) {
    let _ = MLIR.set(f);
}

/// Parses and verifies HLO text; `what` names its source in errors.
fn module_from_text(text: &str, what: &str) -> PluginResult<Module> {
    let m = axle::ir::parse_module(text).map_err(|e| PluginError::invalid(e.render(what)))?;
    axle::verify_for_cli(&m, text, what).map_err(PluginError::invalid)?;
    Ok(m)
}

/// Reads and verifies a serialized `HloModuleProto`; `what` names its source in errors.
fn module_from_proto(bytes: &[u8], what: &str) -> PluginResult<Module> {
    let m = axle_hlo_proto::read_module(bytes)
        .map_err(|e| PluginError::invalid(format!("axle: {what}: {e}")))?;
    axle::verify_module(&m).map_err(|e| PluginError::invalid(format!("axle: {what}: {e}")))?;
    Ok(m)
}

/// The module of a program of `format`.
pub fn module(format: &str, code: &[u8]) -> PluginResult<Module> {
    match format {
        "mlir" => {
            let convert = MLIR.get().ok_or_else(|| {
                PluginError::unimplemented(
                    "axle: format \"mlir\" (StableHLO) needs the converter the axle Python \
                     package registers (load the plugin from a Python process with jax); \
                     send format \"hlo\" (a serialized HloModuleProto) otherwise",
                )
            })?;
            let proto = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| convert(code)))
                .map_err(|_| PluginError::internal("axle: the StableHLO converter panicked"))?
                .map_err(|e| {
                    PluginError::invalid(format!("axle: StableHLO to HLO conversion failed: {e}"))
                })?;
            module_from_proto(&proto, "the HLO of a StableHLO program")
        }
        "hlo" => module_from_proto(code, "program of format hlo"),
        "hlo_text" => {
            let text = std::str::from_utf8(code)
                .map_err(|_| PluginError::invalid("axle: format hlo_text is not UTF-8"))?;
            module_from_text(text, "<hlo>")
        }
        f => Err(PluginError::invalid(format!(
            "axle: unknown program format {f:?} (axle reads \"mlir\", \"hlo\" and \"hlo_text\")"
        ))),
    }
}
