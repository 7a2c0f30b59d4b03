//! [`Device`]: what the launch-plan executor ([`crate::executor`]) needs of a machine that runs
//! the kernels (a CUDA GPU, [`crate::cuda`], or the host simulator, [`crate::sim`]), and
//! [`DeviceMemory`], the buffers of one device behind generational keys.
//!
//! Invariants: a buffer is reached only through its [`BufferKey`], a `slotmap` key whose
//! generation changes when the slot is freed, so a stale or freed key is an error value
//! ("stale buffer handle"), never a read of freed or reused memory; freeing twice is an error
//! too. The store's lock is held while a kernel runs on its buffers, so no buffer a kernel
//! reads or writes is freed under it. The store counts its live buffers and bytes and their
//! peaks ([`DeviceMemory::peak`]), which the executor's early frees keep low.

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
    buffers: Mutex<Store<D::Mem>>,
}

/// The live buffers (each with its size in bytes) and the counts of them.
struct Store<M> {
    map: SlotMap<BufferKey, (M, usize)>,
    bytes: usize,
    peak: Peak,
}

/// The most buffers, and the most bytes, live at once since the last
/// [`DeviceMemory::reset_peak`] (each peak on its own: they need not be reached together).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Peak {
    /// Live buffers.
    pub buffers: usize,
    /// Live bytes.
    pub bytes: usize,
}

impl<M> Store<M> {
    fn insert(&mut self, mem: M, bytes: usize) -> BufferKey {
        let key = self.map.insert((mem, bytes));
        self.bytes += bytes;
        self.peak.buffers = self.peak.buffers.max(self.map.len());
        self.peak.bytes = self.peak.bytes.max(self.bytes);
        key
    }

    fn get(&self, key: BufferKey) -> Result<&M, String> {
        self.map.get(key).map(|e| &e.0).ok_or_else(|| stale(key))
    }
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
            buffers: Mutex::new(Store {
                map: SlotMap::with_key(),
                bytes: 0,
                peak: Peak::default(),
            }),
        }
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// The buffers, locked (a panic of another thread holding the lock left them consistent:
    /// every update is a single insert or remove).
    fn lock(&self) -> MutexGuard<'_, Store<D::Mem>> {
        self.buffers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new buffer holding `bytes`.
    pub fn upload(&self, bytes: &[u8]) -> Result<BufferKey, String> {
        let mem = self.device.upload(bytes)?;
        Ok(self.lock().insert(mem, bytes.len()))
    }

    /// A new buffer of `bytes` bytes, to be written by a kernel.
    pub fn alloc(&self, bytes: usize) -> Result<BufferKey, String> {
        let mem = self.device.alloc(bytes)?;
        Ok(self.lock().insert(mem, bytes))
    }

    /// The bytes of buffer `key`; an error for a stale key.
    pub fn download(&self, key: BufferKey) -> Result<Vec<u8>, String> {
        let store = self.lock();
        self.device.download(store.get(key)?)
    }

    /// Frees buffer `key`; an error for a stale key (freed already).
    pub fn free(&self, key: BufferKey) -> Result<(), String> {
        let mut store = self.lock();
        let (_, bytes) = store.map.remove(key).ok_or_else(|| stale(key))?;
        store.bytes -= bytes;
        Ok(())
    }

    /// Whether `key` names a live buffer.
    pub fn contains(&self, key: BufferKey) -> bool {
        self.lock().map.contains_key(key)
    }

    /// The number of live buffers.
    pub fn live(&self) -> usize {
        self.lock().map.len()
    }

    /// The most buffers and bytes live at once since the memory was made or the last
    /// [`DeviceMemory::reset_peak`].
    pub fn peak(&self) -> Peak {
        self.lock().peak
    }

    /// Starts the peaks again from what is live now.
    pub fn reset_peak(&self) {
        let mut store = self.lock();
        store.peak = Peak {
            buffers: store.map.len(),
            bytes: store.bytes,
        };
    }

    /// Runs kernel `index` of `program` on the buffers `args`; an error when one is stale.
    pub fn launch(
        &self,
        program: &D::Program,
        kernel: &KernelInfo,
        index: usize,
        args: &[BufferKey],
    ) -> Result<(), String> {
        let store = self.lock();
        let mems = args
            .iter()
            .map(|&k| store.get(k))
            .collect::<Result<Vec<_>, _>>()?;
        self.device.launch(program, kernel, index, &mems)
    }
}
