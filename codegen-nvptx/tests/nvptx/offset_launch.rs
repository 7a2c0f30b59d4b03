//! Kernel arguments at byte offsets and device-to-device copies ([`DeviceMemory::launch`],
//! [`DeviceMemory::copy`]) on the host simulator: a kernel reads and writes values placed at
//! offsets inside one buffer, as the executor places a run's values inside one temporary
//! allocation, and every range is checked against its buffer's recorded size, so an offset
//! past the end, a copy between overlapping ranges or a stale key is an error, not a write
//! outside the buffer.

use axle_codegen_nvptx::device::{BufferSlice, Device, DeviceMemory};
use axle_codegen_nvptx::sim::SimDevice;
use axle_codegen_nvptx::{plan_kernels, NvptxError};

mod common;
use common::module;

/// The elements of each array.
const LEN: usize = 8;
/// The bytes of each array.
const BYTES: usize = LEN * 4;

fn f32_bytes(f: impl Fn(usize) -> f32) -> Vec<u8> {
    (0..LEN).flat_map(|i| f(i).to_le_bytes()).collect()
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn a_kernel_runs_on_values_at_offsets_of_one_buffer_and_copies_move_them() {
    let m = module(
        "HloModule add\n\nENTRY e {\n  a = f32[8] parameter(0)\n  b = f32[8] parameter(1)\n  \
         ROOT s = f32[8] add(a, b)\n}\n",
    );
    let kernels = plan_kernels(&m).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(kernels.len(), 1, "one kernel for the add");
    let mem = DeviceMemory::new(SimDevice::default());
    let program = mem
        .device()
        .load(&m, &kernels)
        .unwrap_or_else(|e| panic!("{e}"));
    let a = mem.upload(&f32_bytes(|i| i as f32)).unwrap();
    let b = mem.upload(&f32_bytes(|i| 10.0 * i as f32)).unwrap();
    // One arena: a at 32, b at 64, the sum at 96, bytes 0..32 untouched.
    let arena = mem.alloc(4 * BYTES).unwrap();
    let at = |offset| BufferSlice {
        key: arena,
        offset,
        bytes: BYTES,
    };
    mem.copy(BufferSlice::whole(a, BYTES), at(BYTES)).unwrap();
    mem.copy(BufferSlice::whole(b, BYTES), at(2 * BYTES))
        .unwrap();
    let args = [at(3 * BYTES), at(BYTES), at(2 * BYTES)];
    mem.launch(&program, &kernels[0], 0, &args)
        .unwrap_or_else(|e| panic!("{e}"));
    let all = f32s(&mem.download(arena).unwrap());
    let want: Vec<f32> = (0..LEN).map(|i| 11.0 * i as f32).collect();
    assert_eq!(&all[3 * LEN..], want.as_slice(), "the sum at offset 96");
    assert_eq!(
        &all[..LEN],
        &[0.0; LEN],
        "bytes before the values untouched"
    );
    assert_eq!(
        &all[LEN..2 * LEN],
        f32s(&f32_bytes(|i| i as f32)).as_slice()
    );
    // A copy within the arena, then out of it into a buffer of its own.
    mem.copy(at(3 * BYTES), at(0)).unwrap();
    let out = mem.alloc(BYTES).unwrap();
    mem.copy(at(0), BufferSlice::whole(out, BYTES)).unwrap();
    assert_eq!(f32s(&mem.download(out).unwrap()), want);
    for k in [a, b, arena, out] {
        mem.free(k).unwrap();
    }
    assert_eq!(mem.live(), 0);
}

#[test]
fn ranges_past_a_buffer_overlapping_copies_and_stale_keys_are_errors() {
    let m = module(
        "HloModule neg\n\nENTRY e {\n  a = f32[8] parameter(0)\n  ROOT n = f32[8] negate(a)\n}\n",
    );
    let kernels = plan_kernels(&m).unwrap_or_else(|e| panic!("{e}"));
    let mem = DeviceMemory::new(SimDevice::default());
    let program = mem
        .device()
        .load(&m, &kernels)
        .unwrap_or_else(|e| panic!("{e}"));
    let arena = mem.alloc(2 * BYTES).unwrap();
    let at = |offset| BufferSlice {
        key: arena,
        offset,
        bytes: BYTES,
    };
    // The output would end 16 bytes past the arena.
    let e = mem
        .launch(&program, &kernels[0], 0, &[at(BYTES + 16), at(0)])
        .unwrap_err();
    assert!(
        matches!(&e, NvptxError::Device(m) if m.contains("run past")),
        "{e}"
    );
    let e = mem.copy(at(0), at(BYTES + 4)).unwrap_err();
    assert!(
        matches!(&e, NvptxError::Device(m) if m.contains("run past")),
        "{e}"
    );
    let e = mem.copy(at(0), at(16)).unwrap_err();
    assert!(
        matches!(&e, NvptxError::Device(m) if m.contains("overlapping")),
        "{e}"
    );
    let e = mem
        .copy(
            at(0),
            BufferSlice {
                bytes: 4,
                ..at(BYTES)
            },
        )
        .unwrap_err();
    assert!(
        matches!(&e, NvptxError::Device(m) if m.contains("a copy of 32 bytes into 4 bytes")),
        "{e}"
    );
    // In range, the same launch works; once the arena is freed its key is stale.
    mem.launch(&program, &kernels[0], 0, &[at(BYTES), at(0)])
        .unwrap_or_else(|e| panic!("{e}"));
    mem.free(arena).unwrap();
    let e = mem
        .launch(&program, &kernels[0], 0, &[at(BYTES), at(0)])
        .unwrap_err();
    assert!(
        matches!(&e, NvptxError::Device(m) if m.contains("stale")),
        "{e}"
    );
    let e = mem.copy(at(0), at(BYTES)).unwrap_err();
    assert!(
        matches!(&e, NvptxError::Device(m) if m.contains("stale")),
        "{e}"
    );
}
