//! [`Logging`]: the host simulator, recording the size of every buffer it allocates (uploads,
//! the arguments' and the constants', are not recorded), so a test sees what one run
//! allocated; the live buffers and bytes and their peaks are [`DeviceMemory`]'s own
//! ([`DeviceMemory::live`], [`DeviceMemory::peak`]).

use std::sync::Mutex;

use axle_codegen_nvptx::device::{Device, DeviceMemory};
use axle_codegen_nvptx::sim::{SimDevice, SimMem};
use axle_codegen_nvptx::{CodegenError, KernelInfo};
use axle_ir::Module;

/// The simulator, recording the size of every buffer it allocates.
#[derive(Default)]
pub struct Logging {
    sim: SimDevice,
    allocs: Mutex<Vec<usize>>,
}

impl Logging {
    /// The sizes of the buffers allocated since the last call, in order; the record starts
    /// again empty.
    pub fn take_allocs(&self) -> Vec<usize> {
        std::mem::take(&mut *self.allocs.lock().unwrap())
    }
}

/// The memory of a fresh [`Logging`] simulator.
pub fn logging_memory() -> DeviceMemory<Logging> {
    DeviceMemory::new(Logging::default())
}

impl Device for Logging {
    type Mem = SimMem;
    type Program = <SimDevice as Device>::Program;

    fn name(&self) -> &str {
        self.sim.name()
    }
    fn description(&self) -> String {
        self.sim.description()
    }
    fn upload(&self, bytes: &[u8]) -> Result<SimMem, String> {
        self.sim.upload(bytes)
    }
    fn alloc(&self, bytes: usize) -> Result<SimMem, String> {
        self.allocs.lock().unwrap().push(bytes);
        self.sim.alloc(bytes)
    }
    fn download(&self, mem: &SimMem) -> Result<Vec<u8>, String> {
        self.sim.download(mem)
    }
    fn read(&self, mem: &SimMem, offset: usize, bytes: usize) -> Result<Vec<u8>, String> {
        self.sim.read(mem, offset, bytes)
    }
    fn load(&self, m: &Module, kernels: &[KernelInfo]) -> Result<Self::Program, CodegenError> {
        self.sim.load(m, kernels)
    }
    fn launch(
        &self,
        program: &Self::Program,
        kernel: &KernelInfo,
        index: usize,
        args: &[(&SimMem, usize)],
    ) -> Result<(), String> {
        self.sim.launch(program, kernel, index, args)
    }
    fn copy(
        &self,
        src: &SimMem,
        src_off: usize,
        dst: &SimMem,
        dst_off: usize,
        bytes: usize,
    ) -> Result<(), String> {
        self.sim.copy(src, src_off, dst, dst_off, bytes)
    }
}
