//! Running code in XLA CPU's floating-point mode: x86's flush-to-zero (FTZ) and
//! denormals-are-zero (DAZ) bits of MXCSR, which XLA CPU sets while it executes. The `cpu`
//! backend runs its kernels (and the runtime routines they call) in this mode; the evaluator
//! runs the routines it shares with that runtime ([`crate::fft`], [`crate::trsm`], Cholesky)
//! in it too, so a subnormal operand reads as zero on both sides.
//!
//! [`without_float_mode`] turns both modes off around the exact conversions into and out of
//! such code.
//!
//! Invariant: the thread's control register is restored when `f` returns. On other
//! architectures `ftz` is ignored (the code runs in the default mode).

/// Runs `f` with x86's flush-to-zero and denormals-are-zero modes on (when `ftz`), restoring
/// the thread's floating-point control register afterwards.
pub fn with_float_mode<T>(ftz: bool, f: impl FnOnce() -> T) -> T {
    #[cfg(target_arch = "x86_64")]
    if ftz {
        let mut saved: u32 = 0;
        // SAFETY: stmxcsr/ldmxcsr read and write this thread's SSE control register only.
        unsafe {
            std::arch::asm!("stmxcsr [{}]", in(reg) &mut saved, options(nostack));
            let on: u32 = saved | 0x8040;
            std::arch::asm!("ldmxcsr [{}]", in(reg) &on, options(nostack, readonly));
        }
        let r = f();
        // SAFETY: as above.
        unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &saved, options(nostack, readonly)) };
        return r;
    }
    let _ = ftz;
    f()
}

/// Runs `f` with x86's flush-to-zero and denormals-are-zero modes off, restoring the thread's
/// floating-point control register afterwards: for the exact conversions around code that
/// runs in XLA CPU's mode (a subnormal converted from `f32` to `f64` under DAZ reads as zero,
/// one converted back under FTZ is written as zero, where XLA's converts keep it).
pub fn without_float_mode<T>(f: impl FnOnce() -> T) -> T {
    #[cfg(target_arch = "x86_64")]
    {
        let mut saved: u32 = 0;
        // SAFETY: stmxcsr/ldmxcsr read and write this thread's SSE control register only.
        unsafe {
            std::arch::asm!("stmxcsr [{}]", in(reg) &mut saved, options(nostack));
            let off: u32 = saved & !0x8040;
            std::arch::asm!("ldmxcsr [{}]", in(reg) &off, options(nostack, readonly));
        }
        let r = f();
        // SAFETY: as above.
        unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &saved, options(nostack, readonly)) };
        r
    }
    #[cfg(not(target_arch = "x86_64"))]
    f()
}
