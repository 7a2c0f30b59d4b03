//! Runs every case of the shared corpus on the reference evaluator, from the pre-optimization
//! HLO (`NAME.hlo`) and from XLA CPU's optimized HLO (`NAME.opt.hlo`), and compares every output
//! leaf with XLA's output (`NAME.outK.npy`) under the manifest's tolerance.
//!
//! One named test per case and file: `NAME.hlo` and `NAME.opt.hlo`, plus a trial proving the
//! harness notices a wrong answer.

use axle_analysis::evaluate;
use axle_testkit::{leaves, shared_dir, trials, RunFailure, Runner};
use libtest_mimic::Arguments;
use std::sync::Arc;

/// The evaluator as a [`Runner`].
fn evaluator() -> Runner {
    Arc::new(|m, args| {
        evaluate(m, args)
            .map(|l| leaves(&l))
            .map_err(|e| RunFailure {
                opcode: e.opcode.to_string(),
                message: e.to_string(),
            })
    })
}

fn main() {
    let args = Arguments::from_args();
    let dir = shared_dir().join("corpus");
    libtest_mimic::run(&args, trials(&dir, true, true, evaluator())).exit();
}
