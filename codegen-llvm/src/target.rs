//! [`Target`]: what the shared LLVM layer asks of the machine it emits code for.
//!
//! The elemental generators and the scalar semantics of every op are written once, against
//! [`crate::cg::Cg`]; the few places where the host CPU and an NVIDIA GPU differ are answered by
//! the target the code generator was made for: the address space of buffers, the attributes put
//! on every function (CPU name and features, vector width), how a math library function is
//! called (the C library on the host; a GPU has none), and where a kernel's thread and block
//! indices come from.
//!
//! Invariants: this file knows no implementation of the trait (the backends implement it); a
//! target answers the same way every time it is asked, so one module's code is consistent.

use inkwell::AddressSpace;

/// The special registers a kernel's global thread index is computed from (one launch
/// dimension): `block * block_size + thread`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadRegisters {
    /// The intrinsic reading the thread's index within its block.
    pub thread: &'static str,
    /// The intrinsic reading the block's index within the grid.
    pub block: &'static str,
    /// The intrinsic reading the number of threads of a block.
    pub block_size: &'static str,
}

/// The machine a code generator emits for.
pub trait Target {
    /// The backend's name in messages (`cpu`, `nvptx`).
    fn name(&self) -> &str;

    /// The address space of the buffers kernels read and write (and of constant arrays).
    fn buffer_address_space(&self) -> AddressSpace;

    /// String attributes (`key`, `value`) put on every function the code generator adds.
    fn function_attributes(&self) -> Vec<(String, String)>;

    /// The widest vector, in bits, loops should be vectorized for (0: no preference).
    fn vector_bits(&self) -> u32;

    /// The symbol through which C math library function `libm_name` (`expf`, `atan2`,
    /// `hypot`) is called, or `None` where the target has no such function (the op is then an
    /// error naming it).
    fn math_function(&self, libm_name: &str) -> Option<String>;

    /// The special registers of the global thread index, on targets whose kernels run as a grid
    /// of threads; `None` where a kernel is called with a range of work items instead.
    fn thread_registers(&self) -> Option<ThreadRegisters>;

    /// The longest loop of the elemental generator ([`crate::elemental::Gen::nest`] and the
    /// runs of its sums) LLVM may unroll; longer ones carry `llvm.loop.unroll.disable`.
    /// `None`: no limit.
    fn unroll_limit(&self) -> Option<i64> {
        None
    }
}
