//! [`Outcome`]: what one check of a fuzz target found (a pass, a clear refusal by the backend,
//! or a failure), the type every target's check returns.
//!
//! Invariant: only `Fail` counts against a campaign; `Unsupported` carries the backend's own
//! message naming what it does not support.

/// What one check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The property holds.
    Pass,
    /// The case needs something the backend clearly reports it does not support (the message).
    Unsupported(String),
    /// The property does not hold, or the check panicked (the message).
    Fail(String),
}

impl From<Result<(), String>> for Outcome {
    fn from(r: Result<(), String>) -> Outcome {
        match r {
            Ok(()) => Outcome::Pass,
            Err(e) => Outcome::Fail(e),
        }
    }
}

impl Outcome {
    /// Whether this is a failure.
    pub fn is_fail(&self) -> bool {
        matches!(self, Outcome::Fail(_))
    }
}
