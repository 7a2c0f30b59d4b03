//! The CUDA device: the NVPTX backend's PTX loaded and launched through the CUDA driver API
//! (`cudarc`, loading `libcuda` at run time, so the crate builds and runs where CUDA is absent).
//!
//! Invariants: no driver call is made before [`CudaDevice::open`] has checked that the driver
//! library is present; without it (or without a device) opening is an error value saying so,
//! never a panic (a panic inside the driver bindings is caught and reported as an error). A
//! buffer allocates at least one byte (CUDA refuses empty allocations; `cuMemAlloc` aligns it to
//! 256 bytes, above the kernels' `BUFFER_ALIGN`) and remembers its
//! length, so a zero-sized buffer downloads as no bytes. Every launch waits for the kernel,
//! so a launch's errors are reported by the launch that caused them.
//!
//! This code has not been run on a GPU in this repository's CI (none is present there).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use axle_ir::Module;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;

use crate::device::Device;
use crate::kernels::KernelInfo;
use crate::{emit_planned, CodegenError, Emit, GpuArch, NvptxOptions};

/// The CUDA device's name.
pub const CUDA_BACKEND: &str = "nvptx";

/// The error when the CUDA driver library is absent.
pub const NO_DRIVER: &str = "no CUDA driver (libcuda) on this machine, so no NVIDIA GPU to run \
    on; `--backend nvptx-sim` runs the same kernels on the host, and `axle compile --backend \
    nvptx --emit ptx` prints them";

/// One GPU, with its context and the stream every copy and launch goes through.
pub struct CudaDevice {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    arch: GpuArch,
    libdevice: Option<std::path::PathBuf>,
}

/// One device buffer: at least one byte allocated, `len` of them in use.
pub struct CudaMem {
    slice: CudaSlice<u8>,
    len: usize,
}

/// A module's kernels loaded on the device, in launch order.
pub struct CudaProgram {
    functions: Vec<CudaFunction>,
}

/// Runs a driver call, turning a panic of the bindings into an error.
fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r.map_err(|e| format!("{what}: {e}")),
        Err(_) => Err(format!("{what}: the CUDA driver bindings failed")),
    }
}

/// Whether the CUDA driver library can be loaded here (no driver call is made).
pub fn driver_present() -> bool {
    // SAFETY: only tries to load the driver library by name.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

impl CudaDevice {
    /// Opens GPU `ordinal`, compiling for `arch`; an error (never a panic) when the driver or
    /// the device is absent.
    pub fn open(ordinal: usize, arch: GpuArch) -> Result<CudaDevice, crate::NvptxError> {
        if !driver_present() {
            return Err(crate::NvptxError::Device(NO_DRIVER.to_string()));
        }
        let ctx = guarded("opening the GPU", || {
            CudaContext::new(ordinal).map_err(|e| e.to_string())
        })
        .map_err(crate::NvptxError::Device)?;
        let stream = ctx.default_stream();
        Ok(CudaDevice {
            ctx,
            stream,
            arch,
            libdevice: crate::libdevice::find_libdevice(),
        })
    }
}

impl Device for CudaDevice {
    type Mem = CudaMem;
    type Program = CudaProgram;

    fn name(&self) -> &str {
        CUDA_BACKEND
    }

    fn description(&self) -> String {
        let name = self.ctx.name().unwrap_or_else(|e| format!("unnamed ({e})"));
        format!("{name} (PTX for {})", self.arch.name())
    }

    fn upload(&self, bytes: &[u8]) -> Result<CudaMem, String> {
        let mut m = self.alloc(bytes.len())?;
        if !bytes.is_empty() {
            guarded("copying to the GPU", || {
                self.stream
                    .memcpy_htod(bytes, &mut m.slice)
                    .map_err(|e| e.to_string())
            })?;
        }
        Ok(m)
    }

    fn alloc(&self, bytes: usize) -> Result<CudaMem, String> {
        let slice = guarded("allocating GPU memory", || {
            self.stream
                .alloc_zeros::<u8>(bytes.max(1))
                .map_err(|e| e.to_string())
        })?;
        Ok(CudaMem { slice, len: bytes })
    }

    fn download(&self, mem: &CudaMem) -> Result<Vec<u8>, String> {
        let mut v = guarded("copying from the GPU", || {
            self.stream
                .clone_dtoh(&mem.slice)
                .map_err(|e| e.to_string())
        })?;
        v.truncate(mem.len);
        Ok(v)
    }

    fn read(&self, mem: &CudaMem, offset: usize, bytes: usize) -> Result<Vec<u8>, String> {
        let end = offset
            .checked_add(bytes)
            .filter(|&e| e <= mem.len)
            .ok_or_else(|| format!("a read of {bytes} bytes at {offset} runs past a buffer"))?;
        guarded("copying from the GPU", || {
            self.stream
                .clone_dtoh(&mem.slice.slice(offset..end))
                .map_err(|e| e.to_string())
        })
    }

    fn copy(
        &self,
        src: &CudaMem,
        src_off: usize,
        dst: &CudaMem,
        dst_off: usize,
        bytes: usize,
    ) -> Result<(), String> {
        let fits = |m: &CudaMem, off: usize| off.checked_add(bytes).is_some_and(|e| e <= m.len);
        if !fits(src, src_off) || !fits(dst, dst_off) {
            return Err(format!("a copy of {bytes} bytes runs past a buffer"));
        }
        guarded("copying on the GPU", || {
            let (s, _s_sync) = src.slice.device_ptr(&self.stream);
            let (d, _d_sync) = dst.slice.device_ptr(&self.stream);
            // SAFETY: both ranges lie inside their allocations (checked above) and the
            // caller keeps them from overlapping; the stream orders the copy after the kernels
            // that wrote `src` and is synchronized before any later use.
            unsafe {
                cudarc::driver::result::memcpy_dtod_async(
                    d + dst_off as u64,
                    s + src_off as u64,
                    bytes,
                    self.stream.cu_stream(),
                )
            }
            .map_err(|e| e.to_string())?;
            self.stream.synchronize().map_err(|e| e.to_string())
        })
    }

    fn load(&self, m: &Module, kernels: &[KernelInfo]) -> Result<CudaProgram, CodegenError> {
        let opts = NvptxOptions {
            gpu_arch: self.arch,
            libdevice: self.libdevice.clone(),
            ..Default::default()
        };
        let ptx = emit_planned(m, kernels, &opts, Emit::Ptx)?;
        let general = |msg: String| CodegenError::general(&m.name, msg);
        let module = guarded("loading the PTX", || {
            self.ctx
                .load_module(Ptx::from_src(ptx))
                .map_err(|e| e.to_string())
        })
        .map_err(general)?;
        let mut functions = Vec::with_capacity(kernels.len());
        for k in kernels {
            let f = guarded(&k.name, || {
                module.load_function(&k.name).map_err(|e| e.to_string())
            })
            .map_err(general)?;
            functions.push(f);
        }
        Ok(CudaProgram { functions })
    }

    fn launch(
        &self,
        program: &CudaProgram,
        kernel: &KernelInfo,
        index: usize,
        args: &[(&CudaMem, usize)],
    ) -> Result<(), String> {
        let f = program
            .functions
            .get(index)
            .ok_or_else(|| format!("no kernel {index}"))?;
        let dim = |x: u64| u32::try_from(x).map_err(|_| format!("{x} does not fit a launch"));
        let cfg = LaunchConfig {
            grid_dim: (dim(kernel.plan.grid)?, 1, 1),
            block_dim: (dim(kernel.plan.block)?, 1, 1),
            shared_mem_bytes: 0,
        };
        guarded("launching", || {
            let views: Vec<_> = args.iter().map(|(a, off)| a.slice.slice(*off..)).collect();
            let mut b = self.stream.launch_builder(f);
            for v in &views {
                b.arg(v);
            }
            // SAFETY: the kernel takes one pointer per buffer, in this order (outputs, then
            // operands), each buffer at least as large as the kernel's accesses.
            unsafe { b.launch(cfg) }.map_err(|e| e.to_string())?;
            self.stream.synchronize().map_err(|e| e.to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_without_a_driver_is_an_error_saying_so() {
        if driver_present() {
            eprintln!("a CUDA driver is present: the no-driver path is not exercised here");
            return;
        }
        let e = CudaDevice::open(0, GpuArch::Sm80)
            .err()
            .expect("no driver, no device");
        assert_eq!(e, crate::NvptxError::Device(NO_DRIVER.to_string()));
        assert!(e.to_string().contains("nvptx-sim"), "{e}");
    }
}
