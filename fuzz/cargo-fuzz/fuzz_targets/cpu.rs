//! libFuzzer harness for the `cpu` target (see `axle_fuzz::cpu`): a failure panics, which
//! libFuzzer reports as a crash and saves the input.
#![no_main]

use axle_fuzz::{Outcome, Target};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Outcome::Fail(e) = Target::Cpu.run_bytes(data) {
        panic!("cpu: {e}");
    }
});
