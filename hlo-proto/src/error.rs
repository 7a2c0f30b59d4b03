//! [`ProtoError`]: why bytes are not a module this crate can read, or why a module cannot be
//! written as an `HloModuleProto`.
//!
//! Every error names what it is about (the computation, the instruction and its opcode, where
//! one is to blame) in its message; reading never panics, whatever the bytes.

use axle_ir::VerifyErrors;

/// An error reading or writing a serialized `HloModuleProto`.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    /// The bytes are not a protobuf message of the expected type (truncated, random, a wire
    /// type that does not match the field).
    #[error("not a serialized HloModuleProto: {0}")]
    Decode(String),
    /// The message decodes but does not describe a module: missing or dangling ids, unknown
    /// opcodes, malformed shapes or literals. The message names the computation and the
    /// instruction (with its opcode) where one is to blame.
    #[error("invalid HloModuleProto: {0}")]
    Invalid(String),
    /// The module was built but breaks an invariant of the IR (the verifier's errors, the same
    /// as for HLO text).
    #[error("invalid HloModuleProto: the module does not verify:\n{0}")]
    Verify(VerifyErrors),
    /// The module holds something an `HloModuleProto` cannot carry (written by
    /// [`crate::write_module`]), named with its instruction.
    #[error("cannot write as HloModuleProto: {0}")]
    Unrepresentable(String),
}

impl From<prost::DecodeError> for ProtoError {
    fn from(e: prost::DecodeError) -> Self {
        ProtoError::Decode(e.to_string())
    }
}
