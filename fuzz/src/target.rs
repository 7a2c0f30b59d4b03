//! [`Target`]: the fuzz targets by name, run on bytes with panics caught, and how their
//! outcomes are reported.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::case::Case;
pub use crate::outcome::Outcome;

/// A fuzz target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "full", derive(clap::ValueEnum))]
pub enum Target {
    /// HLO text through the parser, the verifier and the printer.
    Parse,
    /// `.npy` bytes through the reader and the writer.
    Npy,
    /// A generated module through a random pipeline, against the evaluator.
    Pipeline,
    /// The `pipeline` target with [`crate::planted_sub_self`], a deliberately wrong pass, among
    /// the passes its pipelines draw from: the campaign's self-test, which must fail.
    #[cfg_attr(feature = "full", value(name = "pipeline-planted"))]
    PipelinePlanted,
    /// A generated module on the `cpu` backend, against the evaluator.
    Cpu,
    /// A generated module on the `nvptx-sim` backend, against the evaluator.
    #[cfg_attr(feature = "full", value(name = "nvptx-sim"))]
    NvptxSim,
}

impl Target {
    /// The target's name (`campaign --target NAME`, `cargo fuzz run NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Target::Parse => "parse",
            Target::Npy => "npy",
            Target::Pipeline => "pipeline",
            Target::PipelinePlanted => "pipeline-planted",
            Target::Cpu => "cpu",
            Target::NvptxSim => "nvptx-sim",
        }
    }

    /// Whether the target's input is a generated [`Case`] (else raw bytes).
    pub fn is_generated(self) -> bool {
        matches!(
            self,
            Target::Pipeline | Target::PipelinePlanted | Target::Cpu | Target::NvptxSim
        )
    }

    /// The passes a pipeline target's pipelines are drawn from: the compiler's registry, with
    /// the planted pass for [`Target::PipelinePlanted`]; `None` for the other targets.
    #[cfg(feature = "full")]
    pub fn pass_registry(self) -> Option<&'static axle::ir::PassRegistry> {
        match self {
            Target::Pipeline => Some(axle::passes::registry()),
            Target::PipelinePlanted => Some(crate::planted_sub_self::registry()),
            Target::Parse | Target::Npy | Target::Cpu | Target::NvptxSim => None,
        }
    }

    /// Runs the target on raw bytes (what a fuzzer passes).
    pub fn run_bytes(self, data: &[u8]) -> Outcome {
        match self {
            Target::Parse => crate::parse::check(data).into(),
            Target::Npy => crate::npy::check(data).into(),
            Target::Pipeline | Target::PipelinePlanted | Target::Cpu | Target::NvptxSim => {
                self.run_case(&Case::from_bytes(data))
            }
        }
    }

    /// Runs a generated-module target on a case.
    #[cfg(feature = "full")]
    pub fn run_case(self, case: &Case) -> Outcome {
        match self {
            Target::Pipeline | Target::PipelinePlanted => match self.pass_registry() {
                Some(registry) => crate::pipeline::check(case, registry).into(),
                None => Outcome::Fail("a pipeline target without a pass registry".into()),
            },
            Target::Cpu => crate::cpu::check(case),
            Target::NvptxSim => crate::nvptx_sim::check(case),
            Target::Parse | Target::Npy => Outcome::Fail("not a generated-module target".into()),
        }
    }

    /// Without the `full` feature, generated-module targets cannot run.
    #[cfg(not(feature = "full"))]
    pub fn run_case(self, _case: &Case) -> Outcome {
        Outcome::Fail(format!(
            "the {} target needs axle-fuzz's `full` feature",
            self.name()
        ))
    }
}

thread_local! {
    static PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Replaces the panic hook by one that records the message and location for [`catching`]
/// instead of printing them (call once, before running checks in threads).
pub fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        PANIC.with(|p| *p.borrow_mut() = Some(format!("panic{at}: {msg}")));
    }));
}

/// Runs `f`, turning a panic into [`Outcome::Fail`] with its message.
pub fn catching(f: impl FnOnce() -> Outcome) -> Outcome {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(o) => o,
        Err(_) => Outcome::Fail(
            PANIC
                .with(|p| p.borrow_mut().take())
                .unwrap_or_else(|| "panic".into()),
        ),
    }
}
