//! The CPU backend as a manifest-case runner, shared by the corpus and XLA-reference harnesses.

use axle_codegen_cpu::{compile, CpuOptions};
use axle_testkit::{RunFailure, Runner};
use std::sync::Arc;

/// The CPU backend with default options as a [`Runner`]: compile errors keep the opcode they
/// name (the elided-constant check needs it).
pub fn cpu() -> Runner {
    Arc::new(|m, args| {
        let exe = compile(m, &CpuOptions::default()).map_err(|e| RunFailure {
            opcode: e.opcode.clone(),
            message: e.to_string(),
        })?;
        exe.run_literals(args)
            .map_err(|e| RunFailure::msg(e.to_string()))
    })
}
