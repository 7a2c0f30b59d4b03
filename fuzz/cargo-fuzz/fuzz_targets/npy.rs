//! libFuzzer harness for the `npy` target (see `axle_fuzz::npy`): a failure panics, which
//! libFuzzer reports as a crash and saves the input.
#![no_main]

use axle_fuzz::{Outcome, Target};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Outcome::Fail(e) = Target::Npy.run_bytes(data) {
        panic!("npy: {e}");
    }
});
