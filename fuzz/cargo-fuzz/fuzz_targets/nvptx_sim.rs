//! libFuzzer harness for the `nvptx-sim` target (see `axle_fuzz::nvptx_sim`): a generated module
//! through the gpu pipeline, its kernels run on the host simulator, against the evaluator; a
//! failure panics, which libFuzzer reports as a crash and saves the input.
#![no_main]

use axle_fuzz::{Outcome, Target};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Outcome::Fail(e) = Target::NvptxSim.run_bytes(data) {
        panic!("nvptx-sim: {e}");
    }
});
