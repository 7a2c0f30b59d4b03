//! Every case of the shared corpus (`NAME.hlo` and XLA's optimized `NAME.opt.hlo`) on the `cpu`
//! backend after its default pipeline, the standard `cpu` pipeline (simplification, then
//! fusion and multi-output fusion for the cpu target, run through the backend interface's
//! [`CompileOptions::pipeline`]), against XLA's outputs under the manifest's tolerances: the
//! passes and the code generator must agree on every program, fused, not only the evaluator.
//!
//! One named test per file, plus a trial proving the harness notices a wrong answer.

use axle::backend::{prepare_module, CompileOptions};
use axle_codegen_cpu::{compile, CpuOptions};
use axle_testkit::{shared_dir, trials, RunFailure, Runner};
use libtest_mimic::Arguments;
use std::sync::Arc;

fn cpu_after_pipeline() -> Runner {
    Arc::new(|m, args| {
        let opts = CompileOptions {
            pipeline: Some("cpu".into()),
            ..Default::default()
        };
        let m =
            prepare_module("cpu", m.clone(), &opts).map_err(|e| RunFailure::msg(e.to_string()))?;
        let exe = compile(&m, &CpuOptions::default()).map_err(|e| RunFailure {
            opcode: e.opcode.clone(),
            message: e.to_string(),
        })?;
        exe.run_literals(args)
            .map_err(|e| RunFailure::msg(e.to_string()))
    })
}

fn main() {
    let args = Arguments::from_args();
    let dir = shared_dir().join("corpus");
    libtest_mimic::run(&args, trials(&dir, true, true, cpu_after_pipeline())).exit();
}
