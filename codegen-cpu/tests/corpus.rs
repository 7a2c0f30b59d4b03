//! Runs every case of the shared corpus on the CPU backend, from the pre-optimization HLO
//! (`NAME.hlo`) and from XLA CPU's optimized HLO (`NAME.opt.hlo`), and compares every output leaf
//! with XLA's output (`NAME.outK.npy`) under the manifest's tolerance. Each file is compiled
//! once.
//!
//! One named test per case and file: `NAME.hlo` and `NAME.opt.hlo`, plus a trial proving the
//! harness notices a wrong answer.

use axle_codegen_cpu::{compile, CpuOptions};
use axle_testkit::{shared_dir, trials, RunFailure, Runner};
use libtest_mimic::Arguments;
use std::sync::Arc;

/// The CPU backend with default options as a [`Runner`].
fn cpu() -> Runner {
    Arc::new(|m, args| {
        let exe = compile(m, &CpuOptions::default()).map_err(|e| RunFailure {
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
    libtest_mimic::run(&args, trials(&dir, true, true, cpu())).exit();
}
