//! [`Device`]: what the launch-plan executor ([`crate::executor`]) needs of a machine that runs
//! the kernels (a CUDA GPU, [`crate::cuda`], or the host simulator, [`crate::sim`]), and
//! [`DeviceMemory`], the buffers of one device behind generational keys.
//!
//! Invariants: a buffer is reached only through its [`BufferKey`], a `slotmap` key whose
//! generation changes when the slot is freed, so a stale or freed key is an error value
//! ("stale buffer handle"), never a read of freed or reused memory; freeing twice is an error
//! too. The store's lock is held while a kernel runs on its buffers, so no buffer a kernel
//! reads or writes is freed under it.

use std::sync::{Mutex, MutexGuard};

use axle_ir::Module;
use slotmap::{new_key_type, SlotMap};

use crate::kernels::KernelInfo;
use crate::CodegenError;

new_key_type! {
    /// A device buffer's handle: an index and a generation, so a handle outliving its buffer
    /// is recognized as stale.
    pub struct BufferKey;
}

/// A machine that runs a module's kernels.
pub trait Device: Send + Sync + 'static {
    /// One buffer of device memory.
    type Mem: Send + Sync;
    /// A module's kernels, loaded and ready to launch.
    type Program: Send + Sync;

    /// The device's name in messages (`nvptx`, `nvptx-sim`).
    fn name(&self) -> &str;
    /// A description for device listings.
    fn description(&self) -> String;
    /// A new buffer holding `bytes`.
    fn upload(&self, bytes: &[u8]) -> Result<Self::Mem, String>;
    /// A new buffer of `bytes` bytes whose contents the caller will overwrite.
    fn alloc(&self, bytes: usize) -> Result<Self::Mem, String>;
    /// The bytes of a buffer.
    fn download(&self, mem: &Self::Mem) -> Result<Vec<u8>, String>;
    /// Compiles and loads the kernels `kernels` of module `m` (planned by
    /// [`crate::plan_kernels`]).
    fn load(&self, m: &Module, kernels: &[KernelInfo]) -> Result<Self::Program, CodegenError>;
    /// Runs kernel number `index` of `program` (whose plan is `kernels[index].plan`) on its
    /// buffers, in kernel parameter order (outputs, then operands), and waits for it.
    fn launch(
        &self,
        program: &Self::Program,
        kernel: &KernelInfo,
        index: usize,
        args: &[&Self::Mem],
    ) -> Result<(), String>;
}

/// The buffers of one device.
pub struct DeviceMemory<D: Device> {
    device: D,
    buffers: Mutex<SlotMap<BufferKey, D::Mem>>,
}

/// The error for a key that names no live buffer.
fn stale(key: BufferKey) -> String {
    format!("stale buffer handle {key:?}: the buffer was freed (or belongs to another device)")
}

impl<D: Device> DeviceMemory<D> {
    /// The (empty) memory of `device`.
    pub fn new(device: D) -> Self {
        DeviceMemory {
            device,
            buffers: Mutex::new(SlotMap::with_key()),
        }
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// The buffers, locked (a panic of another thread holding the lock left them consistent:
    /// every update is a single insert or remove).
    pub fn lock(&self) -> MutexGuard<'_, SlotMap<BufferKey, D::Mem>> {
        self.buffers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new buffer holding `bytes`.
    pub fn upload(&self, bytes: &[u8]) -> Result<BufferKey, String> {
        let mem = self.device.upload(bytes)?;
        Ok(self.lock().insert(mem))
    }

    /// A new buffer of `bytes` bytes, to be written by a kernel.
    pub fn alloc(&self, bytes: usize) -> Result<BufferKey, String> {
        let mem = self.device.alloc(bytes)?;
        Ok(self.lock().insert(mem))
    }

    /// The bytes of buffer `key`; an error for a stale key.
    pub fn download(&self, key: BufferKey) -> Result<Vec<u8>, String> {
        let map = self.lock();
        let mem = map.get(key).ok_or_else(|| stale(key))?;
        self.device.download(mem)
    }

    /// Frees buffer `key`; an error for a stale key (freed already).
    pub fn free(&self, key: BufferKey) -> Result<(), String> {
        self.lock().remove(key).map(drop).ok_or_else(|| stale(key))
    }

    /// Whether `key` names a live buffer.
    pub fn contains(&self, key: BufferKey) -> bool {
        self.lock().contains_key(key)
    }

    /// The number of live buffers.
    pub fn live(&self) -> usize {
        self.lock().len()
    }

    /// Runs kernel `index` of `program` on the buffers `args`; an error when one is stale.
    pub fn launch(
        &self,
        program: &D::Program,
        kernel: &KernelInfo,
        index: usize,
        args: &[BufferKey],
    ) -> Result<(), String> {
        let map = self.lock();
        let mems = args
            .iter()
            .map(|&k| map.get(k).ok_or_else(|| stale(k)))
            .collect::<Result<Vec<_>, _>>()?;
        self.device.launch(program, kernel, index, &mems)
    }
}
