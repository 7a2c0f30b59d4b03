//! Runs every case of the shared corpus on the CPU backend, from the pre-optimization HLO
//! (`NAME.hlo`) and from XLA CPU's optimized HLO (`NAME.opt.hlo`), and compares every output leaf
//! with XLA's output (`NAME.outK.npy`) under the manifest's tolerance. Each file is compiled
//! once.
//!
//! One named test per case and file: `NAME.hlo` and `NAME.opt.hlo`, plus a trial proving the
//! harness notices a wrong answer.

mod common;

use axle_testkit::{shared_dir, trials};
use common::cpu;
use libtest_mimic::Arguments;

fn main() {
    let args = Arguments::from_args();
    let dir = shared_dir().join("corpus");
    libtest_mimic::run(&args, trials(&dir, true, true, cpu())).exit();
}
