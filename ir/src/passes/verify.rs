//! `verify`: runs the verifier ([`crate::verify::verify`], whose module documentation lists every
//! invariant) as a pass; the pipeline fails if the module breaks one.
//!
//! Pre-conditions: none. Post-conditions: the module is unchanged.
//!
//! Counters: none.

use crate::module::Module;
use crate::pass::{Changed, Pass, PassCx, PassError};
use crate::verify::VerifyErrors;

/// The `verify` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct VerifyPass;

impl Pass for VerifyPass {
    fn run(&mut self, m: &mut Module, _cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        verify_module(m).map_err(PassError::new)?;
        Ok(false)
    }
}

/// Most errors [`verify_module`] lists.
const MAX_LISTED: usize = 20;

/// Modules up to this many instructions are printed with the errors attached to their lines.
const MAX_ANNOTATED: usize = 2000;

/// Runs the verifier; on failure returns the errors (at most 20) and, for small modules, the
/// module printed with each error under the line it is about.
pub fn verify_module(m: &Module) -> Result<(), InvalidModule> {
    let errs = match crate::verify::verify(m) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    let mut out = String::new();
    for e in errs.errors.iter().take(MAX_LISTED) {
        out.push_str(&e.to_string());
        out.push('\n');
    }
    if errs.errors.len() > MAX_LISTED {
        out.push_str(&format!(
            "... and {} more\n",
            errs.errors.len() - MAX_LISTED
        ));
    }
    if m.num_live_insts() <= MAX_ANNOTATED {
        out.push_str("--- the module, with the errors ---\n");
        out.push_str(&errs.annotate(m));
    }
    Err(InvalidModule {
        errors: errs,
        report: out,
    })
}

/// A module the verifier refuses ([`verify_module`]): every error, and the report (at most
/// 20 errors, and for small modules the module printed with each error under its line) that
/// is its message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{report}")]
pub struct InvalidModule {
    /// Every error the verifier found.
    pub errors: VerifyErrors,
    report: String,
}

impl From<InvalidModule> for String {
    fn from(e: InvalidModule) -> String {
        e.report
    }
}
