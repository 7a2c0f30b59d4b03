//! The nvptx backend's kernels run by the host simulator (`nvptx-sim`) against the reference
//! evaluator: each shaped kernel on sizes that leave partial warps, blocks and tiles (row
//! reductions a warp or a block per row, over several blocks; column reductions; transposes
//! with odd edges; tiled dots whose sizes are not multiples of 16; zero-sized arrays), each
//! test first checking the kernel kind and launch plan it means to exercise. Also: the device
//! memory's generational keys (a freed buffer's handle is an error, everywhere it is used), and
//! misuses of the GPU primitives the simulator reports instead of hanging.

use axle_codegen_nvptx::device::{BufferKey, DeviceMemory};
use axle_codegen_nvptx::executor::Executable;
use axle_codegen_nvptx::reduction::ReductionKind;
use axle_codegen_nvptx::sim::SimDevice;
use axle_codegen_nvptx::{plan_kernels, KernelKind, NvptxError};
use axle_ir::{compare_arrays, ArrayLiteral, Module, Tolerance};
use axle_testkit::leaves;

mod common;
use common::{inputs, matches_evaluator, module, run_sim};

const CLOSE: Tolerance = Tolerance::Close {
    rtol: 1e-4,
    atol: 1e-5,
};

/// The one kernel of `m`, its kind, grid and block.
fn only_kernel(m: &Module) -> (KernelKind, u64, u64) {
    let ks = plan_kernels(m).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ks.len(), 1, "{ks:?}");
    (ks[0].kind.clone(), ks[0].plan.grid, ks[0].plan.block)
}

/// A module reducing `a` of type `ty[dims]` over `rdims` with `op` from `init`.
fn reduce(ty: &str, dims: &str, out: &str, rdims: &str, op: &str, init: &str) -> Module {
    module(&format!(
        r#"
HloModule r
comb {{
  x = {ty}[] parameter(0)
  y = {ty}[] parameter(1)
  ROOT s = {ty}[] {op}(x, y)
}}
ENTRY e {{
  a = {ty}[{dims}] parameter(0)
  z = {ty}[] constant({init})
  ROOT r = {ty}[{out}] reduce(a, z), dimensions={{{rdims}}}, to_apply=comb
}}
"#
    ))
}

fn row_threads(k: &KernelKind) -> u64 {
    match k {
        KernelKind::Reduction(g) => match g.kind {
            ReductionKind::Row { threads_per_row } => threads_per_row,
            ReductionKind::Column => panic!("a column reduction"),
        },
        k => panic!("not a reduction: {k:?}"),
    }
}

#[test]
fn row_reductions_of_odd_sizes_a_warp_per_row_over_many_blocks() {
    // 8 rows per block: 13 blocks, the last one partly idle; rows of 37 leave lanes idle.
    let m = reduce("f32", "100,37", "100", "1", "add", "0");
    let (k, grid, _) = only_kernel(&m);
    assert_eq!((row_threads(&k), grid), (32, 13));
    matches_evaluator(&m, CLOSE);
    // Rows shorter than a warp, and a maximum.
    let m = reduce("f32", "9,5", "9", "1", "maximum", "-inf");
    assert_eq!(row_threads(&only_kernel(&m).0), 32);
    matches_evaluator(&m, Tolerance::Exact);
}

#[test]
fn long_rows_take_a_block_each_through_shared_memory() {
    // Rows longer than 512 get 256 threads each: 8 warp results meet in shared memory after a
    // barrier; 3 rows are 3 blocks.
    let m = reduce("f32", "3,2049", "3", "1", "add", "0");
    let (k, grid, block) = only_kernel(&m);
    assert_eq!((row_threads(&k), grid, block), (256, 3, 256));
    matches_evaluator(&m, CLOSE);
    let m = reduce("f32", "5,1000", "5", "1", "minimum", "inf");
    assert_eq!(row_threads(&only_kernel(&m).0), 256);
    matches_evaluator(&m, Tolerance::Exact);
}

#[test]
fn row_reductions_shuffle_narrow_and_wide_types_exactly() {
    // 16-bit integers go through a shuffle widened to 32 bits, 64-bit values in two halves;
    // integer sums are exact whatever the order.
    for ty in ["s16", "s64", "u8"] {
        let m = reduce(ty, "7,77", "7", "1", "add", "0");
        assert_eq!(row_threads(&only_kernel(&m).0), 32);
        matches_evaluator(&m, Tolerance::Exact);
    }
    let m = reduce("f64", "4,700", "4", "1", "add", "0");
    assert_eq!(row_threads(&only_kernel(&m).0), 256);
    matches_evaluator(
        &m,
        Tolerance::Close {
            rtol: 1e-12,
            atol: 1e-12,
        },
    );
}

#[test]
fn column_reductions_of_odd_sizes() {
    // 45 outputs: 2 blocks of 32 columns, the second with 13; 37 reduced rows over 8 warps.
    let m = reduce("f32", "37,45", "45", "0", "add", "0");
    let (k, grid, _) = only_kernel(&m);
    match &k {
        KernelKind::Reduction(g) => assert_eq!(g.kind, ReductionKind::Column),
        k => panic!("{k:?}"),
    }
    assert_eq!(grid, 2);
    matches_evaluator(&m, CLOSE);
    let m = reduce("s32", "3,333,5", "5", "0,1", "add", "0");
    matches_evaluator(&m, Tolerance::Exact);
}

#[test]
fn transposes_with_odd_edges() {
    for (dims, out, perm) in [
        ("33,47", "47,33", "1,0"),
        ("5,17,19", "5,19,17", "0,2,1"),
        ("1,31", "31,1", "1,0"),
    ] {
        let m = module(&format!(
            "HloModule t\nENTRY e {{\n  a = f32[{dims}] parameter(0)\n  ROOT t = f32[{out}] \
             transpose(a), dimensions={{{perm}}}\n}}\n"
        ));
        let (k, _, _) = only_kernel(&m);
        if dims != "1,31" {
            assert!(matches!(k, KernelKind::Transpose(_)), "{dims}: {k:?}");
        }
        matches_evaluator(&m, Tolerance::Exact);
    }
}

#[test]
fn tiled_dots_of_sizes_not_multiples_of_16() {
    let m = module(
        "HloModule d\nENTRY e {\n  a = f32[17,33] parameter(0)\n  b = f32[33,19] parameter(1)\n  \
         ROOT d = f32[17,19] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
    );
    assert!(matches!(only_kernel(&m).0, KernelKind::Dot(_)));
    matches_evaluator(&m, CLOSE);
    let m = module(
        "HloModule d\nENTRY e {\n  a = f32[3,17,5] parameter(0)\n  b = f32[3,5,9] parameter(1)\n  \
         ROOT d = f32[3,17,9] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, \
         lhs_contracting_dims={2}, rhs_contracting_dims={1}\n}\n",
    );
    assert!(matches!(only_kernel(&m).0, KernelKind::Dot(_)));
    matches_evaluator(&m, CLOSE);
    let m = module(
        "HloModule d\nENTRY e {\n  a = s32[1,40] parameter(0)\n  b = s32[40,1] parameter(1)\n  \
         ROOT d = s32[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
    );
    assert!(matches!(only_kernel(&m).0, KernelKind::Dot(_)));
    matches_evaluator(&m, Tolerance::Exact);
}

#[test]
fn vectorized_loop_kernels_compute_every_element() {
    // Four elements per thread, mixed types, a scalar constant, a multi-output fusion.
    let m = module(
        "HloModule v\nf {\n  a = f32[12,4] parameter(0)\n  b = s32[12,4] parameter(1)\n  \
         c = f32[12,4] convert(b)\n  k = f32[] constant(0.5)\n  kb = f32[12,4] broadcast(k), \
         dimensions={}\n  m = f32[12,4] multiply(a, kb)\n  s = f32[12,4] add(m, c)\n  \
         h = f16[12,4] convert(s)\n  ROOT t = (f32[12,4], f16[12,4]) tuple(s, h)\n}\n\
         ENTRY e {\n  a = f32[12,4] parameter(0)\n  b = s32[12,4] parameter(1)\n  \
         ROOT r = (f32[12,4], f16[12,4]) fusion(a, b), kind=kLoop, calls=f\n}\n",
    );
    assert_eq!(only_kernel(&m).0, KernelKind::VectorLoop { width: 4 });
    matches_evaluator(&m, Tolerance::Exact);
}

#[test]
fn zero_sized_arrays_have_no_launch_and_empty_results() {
    let m = module(
        "HloModule z\nENTRY e {\n  a = f32[0,5] parameter(0)\n  b = f32[0,5] parameter(1)\n  \
         s = f32[0,5] add(a, b)\n  c = f32[3] parameter(2)\n  n = f32[3] negate(c)\n  \
         ROOT t = (f32[0,5], f32[3]) tuple(s, n)\n}\n",
    );
    let ks = plan_kernels(&m).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        ks.len(),
        1,
        "only the non-empty output has a kernel: {ks:?}"
    );
    let got = run_sim(&m, &inputs(&m)).unwrap_or_else(|e| panic!("{e}"));
    assert!(got[0].data.is_empty() && got[0].shape.dims.as_ref() == [0, 5]);
    matches_evaluator(&m, Tolerance::Exact);
    // A reduction over zero elements is its init value.
    let m = reduce("f32", "4,0", "4", "1", "add", "1.5");
    matches_evaluator(&m, Tolerance::Exact);
}

#[test]
fn a_stale_buffer_handle_is_an_error_wherever_it_is_used() {
    let mem = DeviceMemory::new(SimDevice::default());
    let k = mem.upload(&[1, 2, 3, 4]).unwrap();
    assert_eq!(mem.download(k).unwrap(), vec![1, 2, 3, 4]);
    mem.free(k).unwrap();
    let e = mem.download(k).unwrap_err();
    assert!(
        matches!(&e, NvptxError::Device(m) if m.contains("stale buffer handle")),
        "{e}"
    );
    let e = mem.free(k).unwrap_err();
    assert!(
        matches!(&e, NvptxError::Device(m) if m.contains("stale buffer handle")),
        "{e}"
    );
    // The slot is reused by a new buffer (the argument's 16 bytes), whose key differs: the
    // old key stays stale.
    let k2 = mem.upload(&[9; 16]).unwrap();
    assert_ne!(k, k2);
    assert!(mem.download(k).is_err() && !mem.contains(k) && mem.contains(k2));
    // A run on a stale argument fails naming it, and frees what it made.
    let m = module(
        "HloModule n\nENTRY e {\n  a = f32[4] parameter(0)\n  ROOT n = f32[4] negate(a)\n}\n",
    );
    let exe = Executable::compile(&mem, m).unwrap();
    let e = exe.run(&mem, &[vec![k]]).unwrap_err();
    assert!(
        matches!(&e, NvptxError::Run(m) if m.contains("stale buffer handle")),
        "{e}"
    );
    assert_eq!(mem.live(), 1);
    let out = exe.run(&mem, &[vec![k2]]).unwrap();
    let bits = f32::from_le_bytes(mem.download(out[0]).unwrap()[..4].try_into().unwrap());
    assert_eq!(bits, -f32::from_le_bytes([9; 4]));
    // An argument smaller than its parameter is refused, not read past its end.
    let short = mem.upload(&[9; 4]).unwrap();
    let e = exe.run(&mem, &[vec![short]]).unwrap_err();
    assert!(
        matches!(&e, NvptxError::Run(m) if m.contains("run past its 4 bytes")),
        "{e}"
    );
}

#[test]
fn elided_constants_and_unsupported_ops_are_refused_naming_them() {
    let mem = DeviceMemory::new(SimDevice::default());
    let m = module(
        "HloModule c\nENTRY e {\n  a = f32[2] parameter(0)\n  c = f32[2] constant({...})\n  \
         ROOT s = f32[2] add(a, c)\n}\n",
    );
    let e = Executable::compile(&mem, m).err().expect("refused");
    assert_eq!(e.opcode, "constant");
    assert!(e.to_string().contains("elided"), "{e}");
    let m = module(
        "HloModule s\nENTRY e {\n  a = f32[8] parameter(0)\n  \
         ROOT s = f32[8] custom-call(a), custom_call_target=\"Frobnicate\"\n}\n",
    );
    let e = Executable::compile(&mem, m).err().expect("refused");
    assert_eq!(e.opcode, "custom-call");
    assert!(e.to_string().contains("\"Frobnicate\""), "{e}");
}

#[test]
fn libdevice_math_runs_on_the_simulator_where_libdevice_is_found() {
    // f64 `tan` of large arguments reduces them with libdevice's inline multi-word integer PTX.
    let m = module(
        "HloModule m\nENTRY e {\n  a = f32[301] parameter(0)\n  b = f32[301] parameter(1)\n  \
         t = f32[301] tan(a)\n  e = f32[301] erf(a)\n  l = f32[301] log-plus-one(b)\n  \
         x = f32[301] atan2(a, b)\n  ab = f32[301] abs(a)\n  p = f32[301] power(ab, b)\n  \
         d = f64[301] convert(a)\n  ed = f64[301] exponential(d)\n  \
         k = f64[] constant(1e18)\n  c = f64[301] broadcast(k), dimensions={}\n  dc = f64[301] multiply(d, c)\n  td = f64[301] tan(dc)\n  \
         ROOT r = (f32[301], f32[301], f32[301], f32[301], f32[301], f64[301], f64[301]) \
         tuple(t, e, l, x, p, ed, td)\n}\n",
    );
    let dev = SimDevice::with_found_libdevice();
    let mem = DeviceMemory::new(dev.clone());
    if dev.libdevice.is_none() {
        // Without it the same functions are the inline forms (tests/math_fallback.rs).
        eprintln!("no libdevice (set AXLE_LIBDEVICE or AXLE_PTXAS, or run `make deps`)");
        return;
    }
    let exe = Executable::compile(&mem, m.clone()).unwrap_or_else(|e| panic!("{e}"));
    let args = inputs(&m);
    let keys: Vec<Vec<BufferKey>> = args
        .iter()
        .map(|a| {
            leaves(a)
                .iter()
                .map(|l| mem.upload(&l.data).unwrap())
                .collect()
        })
        .collect();
    let out = exe.run(&mem, &keys).unwrap_or_else(|e| panic!("{e}"));
    let want = leaves(&axle_analysis::eval::evaluate(&m, &args).unwrap_or_else(|e| panic!("{e}")));
    for (k, (w, &key)) in want.iter().zip(&out).enumerate() {
        let g = ArrayLiteral {
            shape: w.shape.clone(),
            data: mem.download(key).unwrap(),
        };
        // libdevice is within 2 ulp of the correctly rounded result (tan within 4).
        let tol = if w.shape.ty == axle_ir::ElementType::F64 {
            Tolerance::Close {
                rtol: 1e-13,
                atol: 1e-14,
            }
        } else {
            Tolerance::Close {
                rtol: 2e-6,
                atol: 1e-6,
            }
        };
        compare_arrays(w, &g, tol).unwrap_or_else(|e| panic!("out{k}: {e}"));
    }
}
