//! [`Error`]: every failure of the embedding API in one type, so a client can use `?` from
//! parsing or building a module through compiling and running it.

use std::fmt;

use crate::array::ArrayError;
use crate::backend::BackendError;

/// Why an embedding API call failed.
#[derive(Clone, Debug, PartialEq)]
pub enum Error {
    /// HLO text did not parse or verify (rendered with line, column and a caret).
    Parse(String),
    /// The builder refused an instruction or the built module did not verify.
    Build(axle_ir::builder::BuildError),
    /// The backend failed to compile or run, or an argument does not match its parameter.
    Backend(BackendError),
    /// An array could not be made or viewed as asked.
    Array(ArrayError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Parse(e) => f.write_str(e.trim_end()),
            Error::Build(e) => write!(f, "{e}"),
            Error::Backend(e) => write!(f, "{e}"),
            Error::Array(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    /// The source of the wrapped error (whose text this error's is), so the chain reaches a
    /// backend's own error ([`BackendError`]'s source).
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Parse(_) => None,
            Error::Build(e) => e.source(),
            Error::Backend(e) => e.source(),
            Error::Array(e) => e.source(),
        }
    }
}

impl From<axle_ir::builder::BuildError> for Error {
    fn from(e: axle_ir::builder::BuildError) -> Self {
        Error::Build(e)
    }
}

impl From<BackendError> for Error {
    fn from(e: BackendError) -> Self {
        Error::Backend(e)
    }
}

impl From<ArrayError> for Error {
    fn from(e: ArrayError) -> Self {
        Error::Array(e)
    }
}

impl From<axle_ir::LiteralError> for Error {
    fn from(e: axle_ir::LiteralError) -> Self {
        Error::Array(ArrayError::Shape(e))
    }
}
