//! [`ScheduleError`]: why a module cannot be scheduled or assigned buffers.

use std::fmt;

/// Why scheduling or buffer assignment failed: a module outside what they support (recursion,
/// a computation called from two places before flattening, a missing schedule) or an
/// unsupported construct, named in the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleError {
    /// What went wrong, naming the computation or instruction.
    pub message: String,
}

impl ScheduleError {
    /// An error with `message`.
    pub fn new(message: impl Into<String>) -> ScheduleError {
        ScheduleError {
            message: message.into(),
        }
    }
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ScheduleError {}
