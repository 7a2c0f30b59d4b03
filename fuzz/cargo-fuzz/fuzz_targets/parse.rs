//! libFuzzer harness for the `parse` target (see `axle_fuzz::parse`): a failure panics, which
//! libFuzzer reports as a crash and saves the input.
#![no_main]

use axle_fuzz::{Outcome, Target};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Outcome::Fail(e) = Target::Parse.run_bytes(data) {
        panic!("parse: {e}");
    }
});
