//! [`NvptxError`]: why the NVPTX backend refused or failed, by kind, so a caller can match on
//! where a failure came from (a name it does not know, a launch CUDA cannot run, the device,
//! the executor, the CUDA toolkit, code generation). Every variant's text is the message
//! alone, as the command-line tool and the tests print and match it.

use axle_codegen_llvm::CodegenError;

/// A failure of the NVPTX backend.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NvptxError {
    /// A GPU architecture name the backend does not emit for.
    #[error("unknown GPU architecture '{0}' (known: sm_80, sm_90)")]
    UnknownArch(String),
    /// A tensor-core setting name other than `auto`, `off` and `always`.
    #[error("unknown tensor-core setting '{0}' (known: auto, off, always)")]
    UnknownTensorCores(String),
    /// A kernel has no launch plan CUDA can run (its grid or block passes CUDA's limits, or
    /// its geometry is not one the kernel takes).
    #[error("{0}")]
    Launch(String),
    /// The device or its memory refused an operation (the CUDA driver failed, a buffer handle
    /// is stale, a range runs past its buffer, a copy or write has mismatched lengths).
    #[error("{0}")]
    Device(String),
    /// The static buffer assignment refuses the module, or places buffers where the executor
    /// provides no memory (the module then runs with a device buffer per value).
    #[error("{0}")]
    Assignment(String),
    /// Running the executable failed outside the device: an argument that does not match its
    /// parameter, control flow or a collective the executor cannot run, a failed thread.
    #[error("{0}")]
    Run(String),
    /// A device of a multi-device run failed (the first one that did).
    #[error("device {device}: {source}")]
    OnDevice {
        /// The device.
        device: axle_comm::DeviceId,
        /// Why it failed.
        #[source]
        source: Box<NvptxError>,
    },
    /// A tool or file of the CUDA toolkit failed: `ptxas`, libdevice's bitcode.
    #[error("{0}")]
    Toolkit(String),
    /// Code generation failed (LLVM, or an instruction the backend does not emit). Boxed, so
    /// the error (and every `Result` of the executor's deep recursions) stays small.
    #[error(transparent)]
    Codegen(Box<CodegenError>),
}

impl From<CodegenError> for NvptxError {
    fn from(e: CodegenError) -> Self {
        NvptxError::Codegen(Box::new(e))
    }
}
