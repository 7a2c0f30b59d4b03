//! [`Buffer`], the plugin's `PJRT_Buffer`: a dense row-major array in host memory (Axle's `cpu`
//! device memory is host memory), with its entry points and `PJRT_Client_BufferFromHostBuffer`.
//!
//! Invariants:
//! - A `*mut PJRT_Buffer` handed out is a leaked `Box<Buffer>`, freed only by
//!   `PJRT_Buffer_Destroy`.
//! - The bytes are shared (`Arc`): `PJRT_Buffer_Delete` drops the buffer's own reference, and an
//!   external reference (`PJRT_Buffer_IncreaseExternalReferenceCount`, how JAX lends the memory
//!   to NumPy without a copy) keeps the bytes alive until it is released, so a pointer handed out
//!   never dangles while it is held.
//! - Donation (`input_output_alias`) moves the bytes out of an argument that nothing else holds
//!   into the output it is aliased to ([`Buffer::take_unique`]); the argument is deleted.
//! - [`crate::memory_stats`] counts the bytes of every live buffer that holds its bytes (from its
//!   creation to its deletion, donation or destruction), for all clients of the process: an
//!   external reference that outlives a deleted buffer is the client's memory, not counted.
//! - Layouts are row-major (`minor_to_major` = n-1, ..., 0) with no tiling; any other layout
//!   asked for is an error naming it, never a silent reinterpretation.

use std::sync::{Arc, Mutex};

use axle::ir::{ArrayShape, ElementType};
use axle::Array;
use pjrt_sys::*;

use crate::client::Client;
use crate::element;
use crate::error::{entry, PluginError, PluginResult};
use crate::event::Event;
use crate::memory_stats::{count_alloc, count_free};

/// An array on the device.
pub struct Buffer {
    device: *mut PJRT_Device,
    memory: *mut PJRT_Memory,
    pub(crate) ty: ElementType,
    pub(crate) dims: Vec<i64>,
    minor_to_major: Vec<i64>,
    data: Mutex<Option<Arc<Array>>>,
    external: Mutex<Vec<Arc<Array>>>,
}

impl Buffer {
    /// A buffer holding `array` on `device`'s `memory`, as the pointer the C API hands out.
    pub fn into_raw(
        array: Arc<Array>,
        device: *mut PJRT_Device,
        memory: *mut PJRT_Memory,
    ) -> *mut PJRT_Buffer {
        let dims = array.dims().to_vec();
        let minor_to_major = (0..dims.len() as i64).rev().collect();
        count_alloc(array.bytes().len());
        Box::into_raw(Box::new(Buffer {
            device,
            memory,
            ty: array.ty(),
            dims,
            minor_to_major,
            data: Mutex::new(Some(array)),
            external: Mutex::new(Vec::new()),
        })) as *mut PJRT_Buffer
    }

    /// The buffer behind a pointer.
    pub fn get<'a>(p: *mut PJRT_Buffer) -> PluginResult<&'a Buffer> {
        // SAFETY: buffer pointers come from `Buffer::into_raw`.
        unsafe { (p as *const Buffer).as_ref() }
            .ok_or_else(|| PluginError::invalid("axle: null PJRT_Buffer"))
    }

    /// The bytes, unless the buffer was deleted.
    pub fn array(&self) -> PluginResult<Arc<Array>> {
        self.data
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| PluginError::precondition("axle: the buffer was deleted or donated"))
    }

    /// The bytes themselves, taken out of the buffer (which is then deleted), when nothing else
    /// holds them (no external reference, no other handle): what an execution that donates the
    /// buffer writes its output into. `None` leaves the buffer as it was.
    pub fn take_unique(&self) -> Option<Array> {
        let mut data = self.data.lock().unwrap_or_else(|e| e.into_inner());
        let arc = data.take()?;
        match Arc::try_unwrap(arc) {
            Ok(a) => {
                count_free(a.bytes().len());
                Some(a)
            }
            Err(arc) => {
                *data = Some(arc);
                None
            }
        }
    }

    /// Drops the buffer's own reference to its bytes.
    pub fn delete(&self) {
        if let Some(a) = self.data.lock().unwrap_or_else(|e| e.into_inner()).take() {
            count_free(a.bytes().len());
        }
    }

    /// The device the buffer is on.
    pub fn device(&self) -> *mut PJRT_Device {
        self.device
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.delete();
    }
}

/// The size in bytes of a dense array of `ty` and `dims` ([`ArrayShape::byte_size`]), or an error
/// when a dimension is negative or the size overflows.
fn dense_bytes(ty: ElementType, dims: &[i64]) -> PluginResult<usize> {
    ArrayShape::new(ty, dims)
        .byte_size()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| {
            PluginError::invalid(format!(
                "axle: {}{dims:?} has no size in memory (a negative dimension, or too large)",
                ty.name()
            ))
        })
}

/// Copies the array at `src` with per-dimension `strides` (bytes, may be negative) into `dst`,
/// densely in row-major order.
///
/// # Safety
/// Every element address `src + sum(i_k * strides[k])` for indices in `dims` is readable for
/// `elem` bytes.
unsafe fn gather_strided(
    dst: &mut [u8],
    src: *const u8,
    dims: &[i64],
    strides: &[i64],
    elem: usize,
) {
    if dims.is_empty() {
        std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), elem);
        return;
    }
    let inner: usize = dims[1..].iter().map(|&d| d as usize).product::<usize>() * elem;
    for i in 0..dims[0] as usize {
        let s = src.offset(i as isize * strides[0] as isize);
        gather_strided(
            &mut dst[i * inner..(i + 1) * inner],
            s,
            &dims[1..],
            &strides[1..],
            elem,
        );
    }
}

fn dense_strides(ty: ElementType, dims: &[i64]) -> Vec<i64> {
    let mut s = vec![0i64; dims.len()];
    let mut acc = ty.byte_size() as i64;
    for k in (0..dims.len()).rev() {
        s[k] = acc;
        acc *= dims[k].max(1);
    }
    s
}

/// Checks that a layout the client asks for is the dense row-major one of `ty` and `dims`.
///
/// # Safety
/// `layout` is null or points to a valid `PJRT_Buffer_MemoryLayout`.
unsafe fn check_row_major(
    layout: *const PJRT_Buffer_MemoryLayout,
    ty: ElementType,
    dims: &[i64],
    what: &str,
) -> PluginResult<()> {
    let Some(l) = layout.as_ref() else {
        return Ok(());
    };
    let n = dims.len();
    match l.type_ {
        PJRT_Buffer_MemoryLayout_Type_PJRT_Buffer_MemoryLayout_Type_Tiled => {
            let t = &l.__bindgen_anon_1.tiled;
            let m2m = if t.minor_to_major_size == 0 {
                &[][..]
            } else {
                std::slice::from_raw_parts(t.minor_to_major, t.minor_to_major_size)
            };
            let row_major: Vec<i64> = (0..n as i64).rev().collect();
            if m2m != row_major.as_slice() || t.num_tiles != 0 {
                return Err(PluginError::unimplemented(format!(
                    "axle: {what} layout minor_to_major={m2m:?} with {} tiles; axle keeps \
                     arrays row-major ({row_major:?}, no tiles)",
                    t.num_tiles
                )));
            }
        }
        PJRT_Buffer_MemoryLayout_Type_PJRT_Buffer_MemoryLayout_Type_Strides => {
            let s = &l.__bindgen_anon_1.strides;
            let strides = if s.num_byte_strides == 0 {
                &[][..]
            } else {
                std::slice::from_raw_parts(s.byte_strides, s.num_byte_strides)
            };
            if strides != dense_strides(ty, dims).as_slice() {
                return Err(PluginError::unimplemented(format!(
                    "axle: {what} byte strides {strides:?}; axle keeps arrays dense row-major"
                )));
            }
        }
        t => {
            return Err(PluginError::invalid(format!(
                "axle: {what} layout of unknown type {t}"
            )))
        }
    }
    Ok(())
}

entry! {
    /// `PJRT_Client_BufferFromHostBuffer`: copies the host array (any byte strides) into a new
    /// buffer before returning, so the host buffer is free at once whatever the semantics asked.
    fn client_buffer_from_host_buffer(args: PJRT_Client_BufferFromHostBuffer_Args) {
        let client = Client::get(args.client)?;
        let (device, memory) = client.placement(args.device, args.memory)?;
        let ty = element::from_pjrt(args.type_)?;
        let dims: Vec<i64> = if args.num_dims == 0 {
            Vec::new()
        } else if args.dims.is_null() {
            return Err(PluginError::invalid("PJRT_Client_BufferFromHostBuffer: null dims"));
        } else {
            // SAFETY: the client's `num_dims` dimensions.
            unsafe { std::slice::from_raw_parts(args.dims, args.num_dims) }.to_vec()
        };
        let n = dense_bytes(ty, &dims)?;
        // SAFETY: a layout the client owns, or null.
        unsafe { check_row_major(args.device_layout, ty, &dims, "device")? };
        let mut array = Array::zeros(ty, &dims).map_err(|e| PluginError::invalid(e.to_string()))?;
        if n > 0 {
            if args.data.is_null() {
                return Err(PluginError::invalid("PJRT_Client_BufferFromHostBuffer: null data"));
            }
            let src = args.data as *const u8;
            let dense = dense_strides(ty, &dims);
            let strides: Vec<i64> = if args.byte_strides.is_null() || args.num_byte_strides == 0 {
                dense.clone()
            } else if args.num_byte_strides != dims.len() {
                return Err(PluginError::invalid(format!(
                    "PJRT_Client_BufferFromHostBuffer: {} byte strides for {} dimensions",
                    args.num_byte_strides,
                    dims.len()
                )));
            } else {
                // SAFETY: the client's `num_byte_strides` strides.
                unsafe { std::slice::from_raw_parts(args.byte_strides, args.num_byte_strides) }
                    .to_vec()
            };
            let out = array.bytes_mut();
            if strides == dense {
                // SAFETY: a dense host array of `n` bytes.
                out.copy_from_slice(unsafe { std::slice::from_raw_parts(src, n) });
            } else {
                // SAFETY: the client's array with these strides.
                unsafe { gather_strided(out, src, &dims, &strides, ty.byte_size()) };
            }
        }
        args.buffer = Buffer::into_raw(Arc::new(array), device, memory);
        args.done_with_host_buffer = Event::ready(Ok(()));
        Ok(())
    }
}

entry! {
    /// `PJRT_Buffer_Destroy`.
    fn buffer_destroy(args: PJRT_Buffer_Destroy_Args) {
        if !args.buffer.is_null() {
            // SAFETY: made by `Buffer::into_raw`, destroyed once.
            drop(unsafe { Box::from_raw(args.buffer as *mut Buffer) });
        }
        Ok(())
    }
}

entry! {
    /// `PJRT_Buffer_ElementType`.
    fn buffer_element_type(args: PJRT_Buffer_ElementType_Args) {
        args.type_ = element::to_pjrt(Buffer::get(args.buffer)?.ty)?;
        Ok(())
    }
}

entry! {
    /// `PJRT_Buffer_Dimensions`.
    fn buffer_dimensions(args: PJRT_Buffer_Dimensions_Args) {
        let b = Buffer::get(args.buffer)?;
        args.dims = b.dims.as_ptr();
        args.num_dims = b.dims.len();
        Ok(())
    }
}

entry! {
    /// `PJRT_Buffer_UnpaddedDimensions`: the dimensions (nothing is padded).
    fn buffer_unpadded_dimensions(args: PJRT_Buffer_UnpaddedDimensions_Args) {
        let b = Buffer::get(args.buffer)?;
        args.unpadded_dims = b.dims.as_ptr();
        args.num_dims = b.dims.len();
        Ok(())
    }
}

entry! {
    /// `PJRT_Buffer_DynamicDimensionIndices`: none (shapes are static).
    fn buffer_dynamic_dimension_indices(args: PJRT_Buffer_DynamicDimensionIndices_Args) {
        Buffer::get(args.buffer)?;
        args.dynamic_dim_indices = std::ptr::null();
        args.num_dynamic_dims = 0;
        Ok(())
    }
}

entry! {
    /// `PJRT_Buffer_GetMemoryLayout`: row-major, untiled.
    fn buffer_get_memory_layout(args: PJRT_Buffer_GetMemoryLayout_Args) {
        let b = Buffer::get(args.buffer)?;
        let mut layout = PJRT_Buffer_MemoryLayout {
            struct_size: std::mem::size_of::<PJRT_Buffer_MemoryLayout>(),
            type_: PJRT_Buffer_MemoryLayout_Type_PJRT_Buffer_MemoryLayout_Type_Tiled,
            ..Default::default()
        };
        layout.__bindgen_anon_1.tiled = PJRT_Buffer_MemoryLayout_Tiled {
            struct_size: std::mem::size_of::<PJRT_Buffer_MemoryLayout_Tiled>(),
            extension_start: std::ptr::null_mut(),
            minor_to_major: b.minor_to_major.as_ptr(),
            minor_to_major_size: b.minor_to_major.len(),
            tile_dims: std::ptr::null(),
            tile_dim_sizes: std::ptr::null(),
            num_tiles: 0,
        };
        args.layout = layout;
        Ok(())
    }
}

entry! {
    /// `PJRT_Buffer_OnDeviceSizeInBytes`.
    fn buffer_on_device_size_in_bytes(args: PJRT_Buffer_OnDeviceSizeInBytes_Args) {
        let b = Buffer::get(args.buffer)?;
        args.on_device_size_in_bytes = dense_bytes(b.ty, &b.dims)?;
        Ok(())
    }
}

entry! {
    /// `PJRT_Buffer_Device`.
    fn buffer_device(args: PJRT_Buffer_Device_Args) {
        args.device = Buffer::get(args.buffer)?.device;
        Ok(())
    }
}

entry! {
    /// `PJRT_Buffer_Memory`.
    fn buffer_memory(args: PJRT_Buffer_Memory_Args) {
        args.memory = Buffer::get(args.buffer)?.memory;
        Ok(())
    }
}

entry! {
    /// `PJRT_Buffer_Delete`: drops the bytes (an external reference keeps them alive).
    fn buffer_delete(args: PJRT_Buffer_Delete_Args) {
        Buffer::get(args.buffer)?.delete();
        Ok(())
    }
}

entry! {
    /// `PJRT_Buffer_IsDeleted`.
    fn buffer_is_deleted(args: PJRT_Buffer_IsDeleted_Args) {
        let b = Buffer::get(args.buffer)?;
        args.is_deleted = b.data.lock().unwrap_or_else(|e| e.into_inner()).is_none();
        Ok(())
    }
}

/// A copy of `b`'s bytes on `device` and `memory` (checked by the caller).
fn copy_to(
    b: &Buffer,
    device: *mut PJRT_Device,
    memory: *mut PJRT_Memory,
) -> PluginResult<*mut PJRT_Buffer> {
    let src = b.array()?;
    let copy = Array::from_bytes(src.ty(), src.dims(), src.bytes())
        .map_err(|e| PluginError::internal(e.to_string()))?;
    Ok(Buffer::into_raw(Arc::new(copy), device, memory))
}

/// The client that owns buffer `b` (through its device).
fn client_of<'a>(b: &Buffer) -> PluginResult<&'a Client> {
    Client::get(crate::client::Device::get(b.device)?.client as *mut PJRT_Client)
}

entry! {
    /// `PJRT_Buffer_CopyToDevice`: a copy on the device named (a null device: the buffer's
    /// own), in its memory.
    fn buffer_copy_to_device(args: PJRT_Buffer_CopyToDevice_Args) {
        let b = Buffer::get(args.buffer)?;
        let (device, memory) = if args.dst_device.is_null() {
            (b.device, b.memory)
        } else {
            client_of(b)?.placement(args.dst_device, std::ptr::null_mut())?
        };
        args.dst_buffer = copy_to(b, device, memory)?;
        Ok(())
    }
}

entry! {
    /// `PJRT_Buffer_CopyToMemory`: a copy in the memory named (a null memory: the buffer's
    /// own), on the device it belongs to.
    fn buffer_copy_to_memory(args: PJRT_Buffer_CopyToMemory_Args) {
        let b = Buffer::get(args.buffer)?;
        let (device, memory) = if args.dst_memory.is_null() {
            (b.device, b.memory)
        } else {
            client_of(b)?.placement(std::ptr::null_mut(), args.dst_memory)?
        };
        args.dst_buffer = copy_to(b, device, memory)?;
        Ok(())
    }
}

entry! {
    /// `PJRT_Buffer_ToHostBuffer`: with a null `dst`, the size needed; otherwise a copy into
    /// `dst` (row-major; another host layout is an error).
    fn buffer_to_host_buffer(args: PJRT_Buffer_ToHostBuffer_Args) {
        let b = Buffer::get(args.src)?;
        // SAFETY: a layout the client owns, or null.
        unsafe { check_row_major(args.host_layout, b.ty, &b.dims, "host")? };
        let n = dense_bytes(b.ty, &b.dims)?;
        if args.dst.is_null() {
            args.dst_size = n;
            return Ok(());
        }
        let src = b.array()?;
        if args.dst_size < n {
            return Err(PluginError::invalid(format!(
                "PJRT_Buffer_ToHostBuffer: {} bytes of room for {n}",
                args.dst_size
            )));
        }
        // SAFETY: the client's `dst_size` writable bytes.
        unsafe { std::ptr::copy_nonoverlapping(src.bytes().as_ptr(), args.dst as *mut u8, n) };
        args.event = Event::ready(Ok(()));
        Ok(())
    }
}

entry! {
    /// `PJRT_Buffer_IsOnCpu`: true (the memory is host memory).
    fn buffer_is_on_cpu(args: PJRT_Buffer_IsOnCpu_Args) {
        Buffer::get(args.buffer)?;
        args.is_on_cpu = true;
        Ok(())
    }
}

entry! {
    /// `PJRT_Buffer_ReadyEvent`: ready.
    fn buffer_ready_event(args: PJRT_Buffer_ReadyEvent_Args) {
        let b = Buffer::get(args.buffer)?;
        args.event = Event::ready(b.array().map(|_| ()));
        Ok(())
    }
}

entry! {
    /// `PJRT_Buffer_UnsafePointer`: the address of the bytes.
    fn buffer_unsafe_pointer(args: PJRT_Buffer_UnsafePointer_Args) {
        args.buffer_pointer = Buffer::get(args.buffer)?.array()?.bytes().as_ptr() as usize;
        Ok(())
    }
}

entry! {
    /// `PJRT_Buffer_IncreaseExternalReferenceCount`: the bytes stay alive until the matching
    /// decrease, even if the buffer is deleted meanwhile.
    fn buffer_increase_external_reference_count(args: PJRT_Buffer_IncreaseExternalReferenceCount_Args) {
        let b = Buffer::get(args.buffer)?;
        let a = b.array()?;
        b.external.lock().unwrap_or_else(|e| e.into_inner()).push(a);
        Ok(())
    }
}

entry! {
    /// `PJRT_Buffer_DecreaseExternalReferenceCount`.
    fn buffer_decrease_external_reference_count(args: PJRT_Buffer_DecreaseExternalReferenceCount_Args) {
        let b = Buffer::get(args.buffer)?;
        b.external
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .map(drop)
            .ok_or_else(|| PluginError::precondition("axle: no external reference to release"))
    }
}

entry! {
    /// `PJRT_Buffer_OpaqueDeviceMemoryDataPointer`: the address of the bytes.
    fn buffer_opaque_device_memory_data_pointer(args: PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args) {
        let b = Buffer::get(args.buffer)?;
        let external = b.external.lock().unwrap_or_else(|e| e.into_inner());
        let a = match external.last() {
            Some(a) => a.clone(),
            None => b.array()?,
        };
        args.device_memory_ptr = a.bytes().as_ptr() as *mut std::ffi::c_void;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_strided_host_array_is_copied_densely() {
        // A 2x3 i32 view of a 3x4 array: rows 0..2 (stride 16 bytes), columns 0, 1, 2 reversed
        // (stride -4 bytes, starting at column 2).
        let src: Vec<i32> = (0..12).collect();
        let mut dst = vec![0u8; 2 * 3 * 4];
        // SAFETY: every element address lies inside `src`.
        unsafe {
            gather_strided(
                &mut dst,
                (src.as_ptr() as *const u8).add(2 * 4),
                &[2, 3],
                &[16, -4],
                4,
            )
        };
        let got: Vec<i32> = dst
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, vec![2, 1, 0, 6, 5, 4]);
        assert_eq!(dense_strides(ElementType::F32, &[2, 3]), vec![12, 4]);
    }
}
