//! Errors of the LLVM backends (cpu, nvptx): a compile-time error names the instruction it is
//! about.

use std::fmt;

use axle_ir::{InstId, Module};

/// A compilation or execution failure of an LLVM backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodegenError {
    /// The instruction's name (empty when the error is not about one instruction).
    pub instruction: String,
    /// The instruction's opcode name (empty when not about one instruction).
    pub opcode: String,
    /// The computation the instruction belongs to (or the module name).
    pub computation: String,
    /// What went wrong.
    pub message: String,
}

impl CodegenError {
    /// An error that is not about one instruction.
    pub fn general(context: &str, message: impl Into<String>) -> Self {
        CodegenError {
            instruction: String::new(),
            opcode: String::new(),
            computation: context.to_string(),
            message: message.into(),
        }
    }
}

impl fmt::Display for CodegenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.instruction.is_empty() {
            write!(f, "compiling {}: {}", self.computation, self.message)
        } else {
            write!(
                f,
                "compiling %{} ({}) in {}: {}",
                self.instruction, self.opcode, self.computation, self.message
            )
        }
    }
}

impl std::error::Error for CodegenError {}

/// An internal failure: a message still to be attributed to an instruction, or an attributed
/// error.
#[derive(Debug)]
pub enum Fail {
    /// A message not yet attributed to an instruction.
    Msg(String),
    /// An error attributed to an instruction.
    At(Box<CodegenError>),
}

impl From<String> for Fail {
    fn from(s: String) -> Self {
        Fail::Msg(s)
    }
}

impl From<&str> for Fail {
    fn from(s: &str) -> Self {
        Fail::Msg(s.to_string())
    }
}

// The IR's errors about an instruction's attributes become messages attributed to the
// instruction being emitted.
axle_ir::from_op_errors!(Fail, Fail::Msg);

/// The result of every emitter.
pub type R<T> = Result<T, Fail>;

/// Attributes a bare message to instruction `id`.
pub fn at(m: &Module, id: InstId, f: Fail) -> Fail {
    match f {
        Fail::At(e) => Fail::At(e),
        Fail::Msg(message) => Fail::At(Box::new(CodegenError {
            instruction: m.name(id).to_string(),
            opcode: m.opcode(id).name().to_string(),
            computation: m.comp_name(m.parent(id)).to_string(),
            message,
        })),
    }
}

/// The public error for a failure, attributing bare messages to the module.
pub fn finish(m: &Module, f: Fail) -> CodegenError {
    match f {
        Fail::At(e) => *e,
        Fail::Msg(message) => CodegenError::general(&m.name, message),
    }
}
