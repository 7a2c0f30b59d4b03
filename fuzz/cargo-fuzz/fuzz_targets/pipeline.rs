//! libFuzzer harness for the `pipeline` target (see `axle_fuzz::pipeline`): a failure panics, which
//! libFuzzer reports as a crash and saves the input.
#![no_main]

use axle_fuzz::{Outcome, Target};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Outcome::Fail(e) = Target::Pipeline.run_bytes(data) {
        panic!("pipeline: {e}");
    }
});
