//! The `nvptx-sim` device: the NVPTX backend's kernels run on the host ([`crate::sim_jit`]
//! compiles them, `sim_threads` runs their grids), with host memory as device memory.
//!
//! Invariants: a buffer is 16-byte aligned (the widest access a kernel makes) and at least one
//! byte is allocated, so a zero-sized buffer still has a unique address; its contents are
//! zeroed when allocated, so a kernel that failed to write an element leaves a deterministic
//! value, never another run's data.

use std::alloc::{alloc_zeroed, dealloc, Layout};

use axle_ir::Module;

use crate::device::Device;
use crate::kernels::{KernelInfo, KernelKind};
use crate::scatter::{ScatterGeometry, ScatterKernel, ScatterPass, UpdateStrategy};
use crate::sim_jit::SimCode;
use crate::sort::{SortKernel, SortPass};
use crate::CodegenError;

/// The simulator's name.
pub const SIM_BACKEND: &str = "nvptx-sim";

/// The host memory of one simulator buffer.
pub struct SimMem {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the memory is owned by the buffer; kernels write it only during a launch, while the
// device memory's lock is held.
unsafe impl Send for SimMem {}
unsafe impl Sync for SimMem {}

impl SimMem {
    fn layout(len: usize) -> Result<Layout, String> {
        Layout::from_size_align(len.max(1), crate::kernels::BUFFER_ALIGN as usize)
            .map_err(|e| format!("{len} bytes: {e}"))
    }

    fn zeroed(len: usize) -> Result<SimMem, String> {
        let layout = SimMem::layout(len)?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(format!("out of host memory for a buffer of {len} bytes"));
        }
        Ok(SimMem { ptr, len })
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` holds `len` initialized bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for SimMem {
    fn drop(&mut self) {
        if let Ok(layout) = SimMem::layout(self.len) {
            // SAFETY: allocated with this layout.
            unsafe { dealloc(self.ptr, layout) };
        }
    }
}

/// The host simulator of an NVIDIA GPU.
#[derive(Clone, Debug, Default)]
pub struct SimDevice {
    /// The libdevice bitcode linked for math functions with no inline form (as the GPU's
    /// kernels link it); without it such a function is refused naming its op.
    pub libdevice: Option<std::path::PathBuf>,
}

impl SimDevice {
    /// The simulator with libdevice where [`crate::libdevice::find_libdevice`] finds it, as
    /// the GPU backend links it.
    pub fn with_found_libdevice() -> SimDevice {
        SimDevice {
            libdevice: crate::libdevice::find_libdevice(),
        }
    }
}

impl Device for SimDevice {
    type Mem = SimMem;
    type Program = SimCode;

    fn name(&self) -> &str {
        SIM_BACKEND
    }

    fn description(&self) -> String {
        format!(
            "host simulator of the nvptx kernels (threads as OS threads; {})",
            if self.libdevice.is_some() {
                "libdevice math"
            } else {
                "no libdevice"
            }
        )
    }

    fn upload(&self, bytes: &[u8]) -> Result<SimMem, String> {
        let m = SimMem::zeroed(bytes.len())?;
        // SAFETY: `m` holds `bytes.len()` bytes and does not overlap `bytes`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), m.ptr, bytes.len()) };
        Ok(m)
    }

    fn alloc(&self, bytes: usize) -> Result<SimMem, String> {
        SimMem::zeroed(bytes)
    }

    fn download(&self, mem: &SimMem) -> Result<Vec<u8>, String> {
        Ok(mem.bytes().to_vec())
    }

    fn read(&self, mem: &SimMem, offset: usize, bytes: usize) -> Result<Vec<u8>, String> {
        offset
            .checked_add(bytes)
            .and_then(|end| mem.bytes().get(offset..end))
            .map(<[u8]>::to_vec)
            .ok_or_else(|| format!("a read of {bytes} bytes at {offset} runs past a buffer"))
    }

    fn copy(
        &self,
        src: &SimMem,
        src_off: usize,
        dst: &SimMem,
        dst_off: usize,
        bytes: usize,
    ) -> Result<(), String> {
        let fits = |m: &SimMem, off: usize| off.checked_add(bytes).is_some_and(|e| e <= m.len);
        if !fits(src, src_off) || !fits(dst, dst_off) {
            return Err(format!("a copy of {bytes} bytes runs past a buffer"));
        }
        // SAFETY: both ranges lie inside their buffers (checked above) and do not overlap
        // (`std::ptr::copy` would be correct even if they did); no kernel runs meanwhile.
        unsafe { std::ptr::copy(src.ptr.add(src_off), dst.ptr.add(dst_off), bytes) };
        Ok(())
    }

    fn load(&self, m: &Module, kernels: &[KernelInfo]) -> Result<SimCode, CodegenError> {
        crate::sim_jit::compile(m, kernels, self.libdevice.as_deref())
    }

    fn launch(
        &self,
        program: &SimCode,
        kernel: &KernelInfo,
        index: usize,
        args: &[(&SimMem, usize)],
    ) -> Result<(), String> {
        let entry = *program
            .entries
            .get(index)
            .ok_or_else(|| format!("no kernel {index}"))?;
        // The caller checked each offset against its buffer's size: the pointers stay inside.
        let table: Vec<*mut u8> = args
            .iter()
            .map(|(m, off)| m.ptr.wrapping_add(*off))
            .collect();
        // A kernel with no barrier and no shuffle runs its threads one after another, but
        // for an atomic scatter update, whose threads race on their output elements as on a
        // GPU (the host's atomics must make that harmless).
        let threads = !matches!(
            kernel.kind,
            KernelKind::Loop
                | KernelKind::VectorLoop { .. }
                | KernelKind::Scatter(ScatterKernel {
                    geo: ScatterGeometry {
                        update: UpdateStrategy::Owner { .. },
                        ..
                    },
                    ..
                })
                | KernelKind::Scatter(ScatterKernel {
                    pass: ScatterPass::Copy,
                    ..
                })
                | KernelKind::SelectAndScatter
                | KernelKind::Sort(SortKernel {
                    pass: SortPass::Global { .. },
                    ..
                })
        );
        crate::sim_threads::run_grid(entry, &table, &kernel.plan, threads)
    }
}
