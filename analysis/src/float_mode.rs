//! Running code in XLA CPU's floating-point mode: x86's flush-to-zero (FTZ) and
//! denormals-are-zero (DAZ) bits of MXCSR, which XLA CPU sets while it executes. The `cpu`
//! backend runs its JIT kernels (and the runtime routines they call) in this mode.
//!
//! The evaluator computes the mode explicitly wherever it can: its elementwise, dot,
//! reduction and sort arithmetic flushes operands and results (`eval/elementwise.rs`,
//! `eval/dot.rs`), and it runs the routines it shares with the `cpu` runtime
//! ([`crate::trsm`], [`crate::cholesky`]) on [`crate::flushed::Flushed`] values. Only code
//! that cannot take explicit flushing runs here: the FFT (rustfft's vectorized butterflies,
//! which the runtime runs too) and the LAPACK custom calls `potrf`, `getrf`, `geqrf` and
//! `orgqr` (their conversions and arithmetic in the mode, as they ran before).
//!
//! Invariants:
//! - Each change of MXCSR is made and undone inside one `asm!` block: the block saves the
//!   register, writes the mode, calls the code through an `extern "C"` trampoline, and
//!   restores the saved value before it ends, so the Rust code around the block always sees
//!   the default environment. The code called from the block runs in the mode as foreign code
//!   does (as the JIT's kernels do); it is compiled for the default mode, so it must compute
//!   its results at run time, which the shared routines do (no constant inputs to fold).
//! - The register is restored whatever the code does: the trampoline catches a panic, the
//!   block restores MXCSR, and the panic resumes after it. A thread's MXCSR after any call
//!   here is what it was before.
//! - On other architectures the mode is ignored (the code runs in the default mode).

/// MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6) bits.
#[cfg(target_arch = "x86_64")]
const FTZ_DAZ: u32 = 0x8040;

/// Runs `f` with x86's flush-to-zero and denormals-are-zero modes on (when `ftz`), restoring
/// the thread's floating-point control register afterwards (also when `f` panics; the panic
/// then continues).
pub fn with_float_mode<T>(ftz: bool, f: impl FnOnce() -> T) -> T {
    #[cfg(target_arch = "x86_64")]
    if ftz {
        return with_mxcsr(FTZ_DAZ, f);
    }
    let _ = ftz;
    f()
}

/// The thread's MXCSR (the SSE control and status register), read in one asm block: for
/// checking that a mode was restored. `None` off x86-64.
pub fn control_register() -> Option<u32> {
    #[cfg(target_arch = "x86_64")]
    {
        let mut v: u32 = 0;
        // SAFETY: `stmxcsr` stores the thread's MXCSR into the 4 bytes of `v`, which the
        // pointer borrows mutably; it changes no register state.
        unsafe {
            std::arch::asm!("stmxcsr [{}]", in(reg) &mut v, options(nostack, preserves_flags))
        };
        Some(v)
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// The closure a trampoline runs, and where it leaves the result.
#[cfg(target_arch = "x86_64")]
struct Call<F, T> {
    f: Option<F>,
    out: Option<std::thread::Result<T>>,
}

/// Runs the closure of the [`Call`] at `p`, catching a panic, so that nothing unwinds into
/// the asm block that called it.
#[cfg(target_arch = "x86_64")]
extern "C" fn trampoline<F: FnOnce() -> T, T>(p: *mut Call<F, T>) {
    // SAFETY: `p` is the `&mut Call` that `with_mxcsr` passed in `rdi`; it lives on that
    // function's stack for the whole asm block and nothing else touches it meanwhile.
    let call = unsafe { &mut *p };
    if let Some(f) = call.f.take() {
        call.out = Some(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    }
}

/// Runs `f` with MXCSR set to `saved | set`, restoring `saved` before returning (or
/// resuming `f`'s panic). The write, the call and the restore are one asm block.
#[cfg(target_arch = "x86_64")]
fn with_mxcsr<F: FnOnce() -> T, T>(set: u32, f: F) -> T {
    let mut call = Call {
        f: Some(f),
        out: None,
    };
    // slot[0]: the saved register; slot[1]: the mode the call runs in.
    let mut slot = [0u32; 2];
    // SAFETY: the block saves MXCSR into `slot[0]` (addressed by r12, which the C ABI keeps
    // across the call), loads the new mode from `slot[1]`, calls `trampoline` with a pointer
    // to `call` (live, exclusively borrowed) in `rdi`, and reloads `slot[0]` before it ends, so
    // MXCSR leaves the block as it entered. The trampoline cannot unwind (it catches panics).
    // `clobber_abi("C")` marks every register the call may change; the stack is not `nostack`,
    // so it is aligned for the call and the red zone is not in use.
    unsafe {
        std::arch::asm!(
            "stmxcsr [r12]",
            "mov eax, dword ptr [r12]",
            "or eax, {set:e}",
            "mov dword ptr [r12 + 4], eax",
            "ldmxcsr [r12 + 4]",
            "call {tramp}",
            "ldmxcsr [r12]",
            in("r12") slot.as_mut_ptr(),
            in("rdi") &mut call as *mut Call<F, T>,
            set = in(reg) set,
            tramp = in(reg) trampoline::<F, T> as extern "C" fn(*mut Call<F, T>),
            out("eax") _,
            clobber_abi("C"),
        );
    }
    match call.out {
        Some(Ok(v)) => v,
        Some(Err(panic)) => std::panic::resume_unwind(panic),
        // The trampoline always fills `out`; unreachable.
        None => unreachable!("the float-mode trampoline did not run"),
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use std::hint::black_box;

    /// MXCSR without its sticky exception flags (bits 0 to 5), which arithmetic sets.
    fn control() -> u32 {
        control_register().unwrap() & !0x3f
    }

    #[test]
    fn the_mode_is_on_inside_and_restored_after() {
        let before = control();
        assert_eq!(before & FTZ_DAZ, 0, "tests run in the default mode");
        let inside = with_float_mode(true, control);
        assert_eq!(inside & FTZ_DAZ, FTZ_DAZ);
        assert_eq!(control(), before);
        let tiny = f32::from_bits(1); // the smallest subnormal
        assert_eq!(
            with_float_mode(true, || black_box(tiny) * black_box(1.0f32)),
            0.0
        );
        assert_eq!(
            with_float_mode(false, || black_box(tiny) * black_box(1.0f32)),
            tiny
        );
        // Nested: still on inside, restored once after.
        let nested = with_float_mode(true, || {
            with_float_mode(true, || black_box(tiny) * black_box(1.0f32))
                + black_box(tiny) * black_box(1.0f32)
        });
        assert_eq!(nested, 0.0);
        assert_eq!(control(), before);
    }

    #[test]
    fn a_panic_inside_leaves_the_default_mode() {
        let before = control();
        let r = std::panic::catch_unwind(|| {
            with_float_mode(true, || -> u32 {
                assert_eq!(control() & FTZ_DAZ, FTZ_DAZ);
                panic!("inside the float mode")
            })
        });
        let payload = r.expect_err("the panic propagates");
        assert_eq!(
            payload.downcast_ref::<&str>(),
            Some(&"inside the float mode")
        );
        assert_eq!(control(), before);
        assert_eq!(before & FTZ_DAZ, 0);
    }
}
