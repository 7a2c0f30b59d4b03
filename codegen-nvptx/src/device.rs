//! [`Device`]: what the launch-plan executor ([`crate::executor`]) needs of a machine that runs
//! the kernels (a CUDA GPU, [`crate::cuda`], or the host simulator, [`crate::sim`]), and
//! [`DeviceMemory`], the buffers of one device behind generational keys.
//!
//! Invariants: a buffer is reached only through its [`BufferKey`], a `slotmap` key whose
//! generation changes when the slot is freed, so a stale or freed key is an error value
//! ("stale buffer handle"), never a read of freed or reused memory; freeing twice is an error
//! too. A kernel argument or a copy's end is a [`BufferSlice`]: a key, a byte offset into the
//! buffer and the bytes the kernel or copy reaches there, checked against the buffer's
//! recorded size (`offset + bytes <= size`) before the device sees it, so an out-of-range
//! offset is an error value too, never an access past the buffer; the executor places many
//! values in one buffer this way (XLA's GPU backend: base + offset inside one temporary
//! allocation). The store's lock is held while a kernel runs on its buffers, so no buffer a
//! kernel reads or writes is freed under it. The store counts its live buffers and bytes and their
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
    /// The `bytes` bytes of a buffer from byte `offset` (a loop condition or a branch index
    /// read back from inside a larger buffer). The caller ([`DeviceMemory::read`]) has
    /// checked the range against the buffer's size.
    fn read(&self, mem: &Self::Mem, offset: usize, bytes: usize) -> Result<Vec<u8>, String>;
    /// Compiles and loads the kernels `kernels` of module `m` (planned by
    /// [`crate::plan_kernels`]).
    fn load(&self, m: &Module, kernels: &[KernelInfo]) -> Result<Self::Program, CodegenError>;
    /// Runs kernel number `index` of `program` (whose plan is `kernels[index].plan`) on its
    /// buffers, in kernel parameter order (outputs, then operands), each at its byte offset
    /// (the kernel's pointer is the buffer's address plus the offset), and waits for it. The
    /// caller ([`DeviceMemory::launch`]) has checked every offset against the buffer's size.
    fn launch(
        &self,
        program: &Self::Program,
        kernel: &KernelInfo,
        index: usize,
        args: &[(&Self::Mem, usize)],
    ) -> Result<(), String>;
    /// Copies `bytes` bytes from `src` at byte `src_off` to `dst` at byte `dst_off` (the two
    /// may be one buffer, with ranges that do not overlap), and waits for it. The caller
    /// ([`DeviceMemory::copy`]) has checked both ranges against the buffers' sizes.
    fn copy(
        &self,
        src: &Self::Mem,
        src_off: usize,
        dst: &Self::Mem,
        dst_off: usize,
        bytes: usize,
    ) -> Result<(), String>;
}

/// A byte range of a device buffer: what a kernel argument or a copy's end reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufferSlice {
    /// The buffer.
    pub key: BufferKey,
    /// The first byte.
    pub offset: usize,
    /// The bytes reached from `offset`.
    pub bytes: usize,
}

impl BufferSlice {
    /// The whole of buffer `key`, of `bytes` bytes.
    pub fn whole(key: BufferKey, bytes: usize) -> BufferSlice {
        BufferSlice {
            key,
            offset: 0,
            bytes,
        }
    }
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

    /// The buffer of `s` and its offset, once `s` is checked to lie inside it.
    fn reach(&self, s: BufferSlice) -> Result<(&M, usize), String> {
        let (mem, size) = self.map.get(s.key).ok_or_else(|| stale(s.key))?;
        match s.offset.checked_add(s.bytes) {
            Some(end) if end <= *size => Ok((mem, s.offset)),
            _ => Err(format!(
                "{} bytes at offset {} of buffer {:?} run past its {size} bytes",
                s.bytes, s.offset, s.key
            )),
        }
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
    pub fn upload(&self, bytes: &[u8]) -> Result<BufferKey, crate::NvptxError> {
        let mem = self
            .device
            .upload(bytes)
            .map_err(crate::NvptxError::Device)?;
        Ok(self.lock().insert(mem, bytes.len()))
    }

    /// A new buffer of `bytes` bytes, to be written by a kernel.
    pub fn alloc(&self, bytes: usize) -> Result<BufferKey, crate::NvptxError> {
        let mem = self
            .device
            .alloc(bytes)
            .map_err(crate::NvptxError::Device)?;
        Ok(self.lock().insert(mem, bytes))
    }

    /// The bytes of buffer `key`; an error for a stale key.
    pub fn download(&self, key: BufferKey) -> Result<Vec<u8>, crate::NvptxError> {
        let store = self.lock();
        self.device
            .download(store.get(key).map_err(crate::NvptxError::Device)?)
            .map_err(crate::NvptxError::Device)
    }

    /// The bytes of range `s`; an error when it is stale or runs past its buffer.
    pub fn read(&self, s: BufferSlice) -> Result<Vec<u8>, crate::NvptxError> {
        let store = self.lock();
        let (mem, offset) = store.reach(s).map_err(crate::NvptxError::Device)?;
        if s.bytes == 0 {
            return Ok(Vec::new());
        }
        self.device
            .read(mem, offset, s.bytes)
            .map_err(crate::NvptxError::Device)
    }

    /// Writes `bytes` into range `dst` (of their length): uploaded to a staging buffer, copied
    /// into place and the staging buffer freed, so every device does it with the operations
    /// it has. An error when `dst` is stale, runs past its buffer or has another length.
    pub fn write(&self, dst: BufferSlice, bytes: &[u8]) -> Result<(), crate::NvptxError> {
        if dst.bytes != bytes.len() {
            return Err(crate::NvptxError::Device(format!(
                "a write of {} bytes into {} bytes",
                bytes.len(),
                dst.bytes
            )));
        }
        let staging = self.upload(bytes)?;
        let copied = self.copy(BufferSlice::whole(staging, bytes.len()), dst);
        // Made here and freed once, here.
        let _ = self.free(staging);
        copied
    }

    /// Frees buffer `key`; an error for a stale key (freed already).
    pub fn free(&self, key: BufferKey) -> Result<(), crate::NvptxError> {
        let mut store = self.lock();
        let (_, bytes) = store
            .map
            .remove(key)
            .ok_or_else(|| crate::NvptxError::Device(stale(key)))?;
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

    /// The size in bytes of buffer `key`; an error for a stale key.
    pub fn size(&self, key: BufferKey) -> Result<usize, crate::NvptxError> {
        let store = self.lock();
        store
            .map
            .get(key)
            .map(|e| e.1)
            .ok_or_else(|| crate::NvptxError::Device(stale(key)))
    }

    /// Runs kernel `index` of `program` on the byte ranges `args`; an error when one is
    /// stale or runs past its buffer.
    pub fn launch(
        &self,
        program: &D::Program,
        kernel: &KernelInfo,
        index: usize,
        args: &[BufferSlice],
    ) -> Result<(), crate::NvptxError> {
        let store = self.lock();
        let mems = args
            .iter()
            .map(|&s| store.reach(s))
            .collect::<Result<Vec<_>, _>>()
            .map_err(crate::NvptxError::Device)?;
        self.device
            .launch(program, kernel, index, &mems)
            .map_err(crate::NvptxError::Device)
    }

    /// Copies range `src` to range `dst` (of the same length; ranges of one buffer must not
    /// overlap); an error when one is stale or runs past its buffer.
    pub fn copy(&self, src: BufferSlice, dst: BufferSlice) -> Result<(), crate::NvptxError> {
        if src.bytes != dst.bytes {
            return Err(crate::NvptxError::Device(format!(
                "a copy of {} bytes into {} bytes",
                src.bytes, dst.bytes
            )));
        }
        if src.key == dst.key
            && src.offset < dst.offset + dst.bytes
            && dst.offset < src.offset + src.bytes
        {
            return Err(crate::NvptxError::Device(format!(
                "a copy within buffer {:?} between overlapping ranges at {} and {}",
                src.key, src.offset, dst.offset
            )));
        }
        let store = self.lock();
        let (s, so) = store.reach(src).map_err(crate::NvptxError::Device)?;
        let (d, dof) = store.reach(dst).map_err(crate::NvptxError::Device)?;
        if src.bytes == 0 {
            return Ok(());
        }
        self.device
            .copy(s, so, d, dof, src.bytes)
            .map_err(crate::NvptxError::Device)
    }
}
