//! The process-wide LLVM settings every backend compiles under ([`configure`]).
//!
//! LLVM keeps some code generator choices in global command-line options rather than in a
//! target machine or a pass pipeline. Axle sets them once per process, before any target is
//! initialized, and every backend calls [`configure`] first, so every module in every process
//! is compiled under the same settings whichever backend starts first (outputs do not depend
//! on the order of compilations). The settings are part of this crate's sources, which the
//! compilation caches' keys cover.
//!
//! The settings:
//! - `-disable-lsr`: no loop strength reduction in the code generator's IR passes. Axle's
//!   kernels index buffers with one induction variable per loop and constant strides, which
//!   x86 addressing modes take as they are; LSR's search for cheaper induction variables was a
//!   quarter to a third of all LLVM time on every program measured (cpu backend,
//!   codegen-cpu/BENCH.md has the figures) and bought no run time there.

use std::ffi::{c_char, CString};
use std::sync::OnceLock;

/// The options, as `llc` would take them.
const OPTIONS: &[&str] = &["-disable-lsr"];

/// Applies Axle's LLVM settings to this process (once; later calls do nothing). Call it before
/// creating a target machine.
pub fn configure() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let args: Vec<CString> = std::iter::once("axle")
            .chain(OPTIONS.iter().copied())
            .map(|a| CString::new(a).expect("the options hold no NUL"))
            .collect();
        let ptrs: Vec<*const c_char> = args.iter().map(|a| a.as_ptr()).collect();
        let overview = CString::new("Axle").expect("no NUL");
        // SAFETY: `ptrs` holds `args.len()` pointers to NUL-terminated strings that outlive the
        // call, and `overview` is one; LLVM copies what it keeps. The options are LLVM's own, so
        // parsing them cannot fail (a failure would print and exit, which a wrong name here would
        // show in every test).
        unsafe {
            llvm_sys::support::LLVMParseCommandLineOptions(
                ptrs.len() as i32,
                ptrs.as_ptr(),
                overview.as_ptr(),
            );
        }
    });
}
