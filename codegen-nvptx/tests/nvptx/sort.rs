//! The nvptx backend's sort kernels (`sort`, `topk`, the `TopK` custom call) run by the host
//! simulator against the reference evaluator, bit for bit: sizes 0, 1, 2, 3, 17 (one tile),
//! 1000 and 5000 (several kernels: global steps and tile merges), rank 0, empty rows, rank 2
//! and 3 along each dimension, key-value and three-operand sorts, NaN (payloads kept), -0 and
//! duplicates under JAX's TOTALORDER comparator, stability with many ties, descending
//! comparators, narrow and wide element types, and top-k with ties. Each test first checks
//! the kernels it means to exercise; the PTX of a multi-pass sort is assembled by ptxas where
//! it is present.

use axle_analysis::eval::{evaluate_with, EvalOptions};
use axle_codegen_nvptx::sort::SortPass;
use axle_codegen_nvptx::{plan_kernels, KernelKind};
use axle_ir::{
    compare_arrays, ArrayLiteral, ArrayShape, ElementType, Literal, Module, Shape, Tolerance,
};
use axle_testkit::{leaves, noise, real_array};

mod common;
use common::{module, ptx_checked, run_sim};

/// Values that make ties, NaNs of both signs, zeros of both signs and infinities likely.
const SPECIAL: [f64; 9] = [
    f64::NAN,
    -f64::NAN,
    0.0,
    -0.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1.0,
    -1.0,
    2.5,
];

/// Inputs for the entry parameters of `m`: floats drawn from [`SPECIAL`] and noise, integers
/// from `0..ties` (many equal keys).
fn inputs(m: &Module, ties: f64) -> Vec<Literal> {
    m.params(m.entry())
        .iter()
        .enumerate()
        .map(|(k, &p)| {
            let Shape::Array(a) = m.shape(p) else {
                panic!("a test module takes arrays")
            };
            let seed = k as u64 + 1;
            real_array(a.ty, &a.dims, |i| {
                let r = noise(seed, i as u64);
                if a.ty.is_floating() {
                    if r < -0.5 {
                        SPECIAL[((r + 1.0) * 18.0) as usize % SPECIAL.len()]
                    } else {
                        (r * 8.0).round() / 2.0
                    }
                } else {
                    ((r + 1.0) / 2.0 * ties).floor()
                }
            })
        })
        .collect()
}

/// The simulator's results for `m` must equal the evaluator's bit for bit (NaN payloads and
/// signs of zeros included: a sort only moves values).
fn matches_evaluator(m: &Module, ties: f64) {
    matches_evaluator_on(m, &inputs(m, ties));
}

/// [`matches_evaluator`] on the given arguments.
fn matches_evaluator_on(m: &Module, args: &[Literal]) {
    let got = run_sim(m, args).unwrap_or_else(|e| panic!("{e}"));
    let opts = EvalOptions {
        flush_denormals: false,
    };
    let want = leaves(&evaluate_with(m, args, &opts).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(got.len(), want.len());
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.shape, w.shape, "out{k}");
        if g.data != w.data {
            compare_arrays(w, g, Tolerance::Exact).unwrap_or_else(|e| panic!("out{k}: {e}"));
            panic!("out{k}: the bytes differ (a NaN's payload or sign, or a zero's sign)");
        }
    }
}

/// The passes of `m`'s sort kernels, in launch order.
fn passes(m: &Module) -> Vec<SortPass> {
    plan_kernels(m)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .filter_map(|k| match k.kind {
            KernelKind::Sort(s) => Some(s.pass),
            _ => None,
        })
        .collect()
}

/// JAX's comparator on `f32` keys (NaNs and zeros canonicalized, then TOTALORDER), with
/// `extra` further pairs of parameters of types `extra` it ignores, in direction `dir`.
fn jax_comparator(key: &str, extra: &[&str], dir: &str) -> String {
    let mut params = format!("  a = {key}[] parameter(0)\n  b = {key}[] parameter(1)\n");
    for (n, t) in extra.iter().enumerate() {
        params += &format!(
            "  x{n} = {t}[] parameter({})\n  y{n} = {t}[] parameter({})\n",
            2 * n + 2,
            2 * n + 3
        );
    }
    if key.starts_with('f') || key.starts_with("bf") {
        format!(
            "cmp {{\n{params}  nan = {key}[] constant(nan)\n  zero = {key}[] constant(0)\n  \
             na = pred[] compare(a, a), direction=NE\n  za = pred[] compare(a, zero), direction=EQ\n  \
             sa = {key}[] select(za, zero, a)\n  ca = {key}[] select(na, nan, sa)\n  \
             nb = pred[] compare(b, b), direction=NE\n  zb = pred[] compare(b, zero), direction=EQ\n  \
             sb = {key}[] select(zb, zero, b)\n  cb = {key}[] select(nb, nan, sb)\n  \
             ROOT l = pred[] compare(ca, cb), direction={dir}, type=TOTALORDER\n}}\n"
        )
    } else {
        format!("cmp {{\n{params}  ROOT l = pred[] compare(a, b), direction={dir}\n}}\n")
    }
}

/// A module sorting parameters of types `tys` and dimensions `dims` along `dim` by the first,
/// with a JAX comparator in direction `dir`; `stable` adds `is_stable=true`.
fn sort(tys: &[&str], dims: &str, dim: usize, dir: &str, stable: bool) -> Module {
    let cmp = jax_comparator(tys[0], &tys[1..], dir);
    let params: Vec<String> = tys
        .iter()
        .enumerate()
        .map(|(k, t)| format!("  p{k} = {t}[{dims}] parameter({k})\n"))
        .collect();
    let names: Vec<String> = (0..tys.len()).map(|k| format!("p{k}")).collect();
    let shapes: Vec<String> = tys.iter().map(|t| format!("{t}[{dims}]")).collect();
    let result = if tys.len() == 1 {
        shapes[0].clone()
    } else {
        format!("({})", shapes.join(", "))
    };
    let stable = if stable { ", is_stable=true" } else { "" };
    module(&format!(
        "HloModule s\n{cmp}ENTRY e {{\n{}  ROOT s = {result} sort({}), dimensions={{{dim}}}{stable}, \
         to_apply=cmp\n}}\n",
        params.concat(),
        names.join(", ")
    ))
}

#[test]
fn one_dimensional_sorts_of_every_size_class() {
    for n in [0u64, 1, 2, 3, 17, 1000, 5000] {
        let m = sort(&["f32", "s32"], &n.to_string(), 0, "LT", true);
        let p = passes(&m);
        // One tile kernel up to 512 elements; beyond, global steps and tile merges per stage.
        let want = match n {
            0 => 0,
            1..=512 => 1,
            1000 => 3,
            _ => 15,
        };
        assert_eq!(p.len(), want, "{n}: {p:?}");
        if n > 512 {
            assert!(p.iter().any(|s| matches!(s, SortPass::Global { .. })));
            assert!(p.iter().any(|s| matches!(s, SortPass::Merge { .. })));
        }
        matches_evaluator(&m, 10.0);
        if n <= 1000 {
            let m = sort(&["f32"], &n.to_string(), 0, "LT", false);
            matches_evaluator(&m, 10.0);
        }
    }
}

#[test]
fn rank_zero_and_empty_rows() {
    // A scalar sort moves its one element; an empty dimension beside a long one sorts nothing.
    let m = module(&format!(
        "HloModule z\n{}ENTRY e {{\n  a = f32[] parameter(0)\n  b = s32[] parameter(1)\n  \
         ROOT s = (f32[], s32[]) sort(a, b), dimensions={{0}}, to_apply=cmp\n}}\n",
        jax_comparator("f32", &["s32"], "LT")
    ));
    assert_eq!(passes(&m).len(), 1);
    matches_evaluator(&m, 5.0);
    let m = sort(&["f32", "s32"], "0,700", 1, "LT", true);
    assert!(passes(&m).is_empty());
    matches_evaluator(&m, 5.0);
}

#[test]
fn rank_two_and_three_along_each_dimension() {
    for dim in 0..2 {
        matches_evaluator(&sort(&["f32", "s32"], "9,13", dim, "LT", true), 5.0);
    }
    for dim in 0..3 {
        matches_evaluator(&sort(&["s32", "f32"], "5,6,7", dim, "GT", true), 4.0);
    }
    // Multi-pass along a middle dimension: rows are strided.
    let m = sort(&["s32", "s32"], "2,700,3", 1, "LT", false);
    assert!(passes(&m).len() > 1);
    matches_evaluator(&m, 50.0);
}

#[test]
fn key_value_and_three_operand_sorts() {
    // The corpus's shape: f32 keys, f32 values, s32 values.
    matches_evaluator(&sort(&["f32", "f32", "s32"], "6,40", 1, "LT", true), 10.0);
    matches_evaluator(&sort(&["f32", "f32", "s32"], "6,40", 0, "LT", true), 10.0);
    matches_evaluator(
        &sort(&["f32", "f32", "s32"], "3,1500", 1, "GT", false),
        10.0,
    );
}

#[test]
fn stable_with_many_ties_and_descending() {
    // Three distinct keys in up to 1200 elements: stability decides almost every position.
    for n in ["1000", "4,300", "1200"] {
        let m = sort(&["s32", "s32", "f32"], n, 0, "LT", true);
        matches_evaluator(&m, 3.0);
        let m = sort(&["s32", "s32", "f32"], n, 0, "GT", false);
        matches_evaluator(&m, 3.0);
    }
}

#[test]
fn narrow_and_wide_element_types() {
    // Keys and values whose register forms differ from their memory forms.
    for tys in [
        ["f16", "s8"],
        ["bf16", "u64"],
        ["f64", "pred"],
        ["s8", "f16"],
        ["u16", "f64"],
        ["s64", "bf16"],
    ] {
        matches_evaluator(&sort(&tys, "3,37", 1, "LT", true), 6.0);
        matches_evaluator(&sort(&tys, "700", 0, "GT", true), 6.0);
    }
    // bf16 keys under a plain TOTALORDER comparator (as the fuzz generator writes them).
    let m = module(
        "HloModule b\ncmp {\n  a = bf16[] parameter(0)\n  b = bf16[] parameter(1)\n  \
         x = u64[] parameter(2)\n  y = u64[] parameter(3)\n  \
         ROOT l = pred[] compare(a, b), direction=GT, type=TOTALORDER\n}\nENTRY e {\n  \
         k = bf16[3,700] parameter(0)\n  v = u64[3,700] parameter(1)\n  \
         ROOT s = (bf16[3,700], u64[3,700]) sort(k, v), dimensions={1}, to_apply=cmp\n}\n",
    );
    matches_evaluator(&m, 6.0);
    // Sorting predicates themselves.
    let m = module(
        "HloModule p\ncmp {\n  a = pred[] parameter(0)\n  b = pred[] parameter(1)\n  \
         ROOT l = pred[] compare(a, b), direction=LT\n}\nENTRY e {\n  x = s32[600] parameter(0)\n  \
         z = s32[] constant(1)\n  zb = s32[600] broadcast(z), dimensions={}\n  \
         p = pred[600] compare(x, zb), direction=GT\n  \
         ROOT s = pred[600] sort(p), dimensions={0}, to_apply=cmp\n}\n",
    );
    matches_evaluator(&m, 3.0);
}

#[test]
fn nan_payloads_move_bit_for_bit() {
    // Signaling and quiet NaNs with payloads of both signs: JAX's comparator makes them equal,
    // so their original positions order them, and each must arrive with its own bits.
    let bits: [u16; 8] = [
        0x7c01, 0xfc05, 0x7e33, 0xfe00, 0x3c00, 0x8000, 0x0000, 0xbc00,
    ];
    for n in [40i64, 700] {
        let m = sort(&["f16", "s32"], &n.to_string(), 0, "LT", false);
        let keys: Vec<u8> = (0..n as usize)
            .flat_map(|i| bits[(i * 5 + i / 8) % bits.len()].to_le_bytes())
            .collect();
        let vals: Vec<u8> = (0..n as i32).flat_map(|i| i.to_le_bytes()).collect();
        let arr = |ty, data| {
            Literal::Array(ArrayLiteral {
                shape: ArrayShape::new(ty, &[n]),
                data,
            })
        };
        let args = [arr(ElementType::F16, keys), arr(ElementType::S32, vals)];
        matches_evaluator_on(&m, &args);
    }
}

/// A module taking the top `k` of `f32[dims]` with the `topk` op.
fn topk(dims: &str, out: &str, k: usize, largest: bool) -> Module {
    module(&format!(
        "HloModule t\nENTRY e {{\n  x = f32[{dims}] parameter(0)\n  \
         ROOT t = (f32[{out}], s32[{out}]) topk(x), k={k}, largest={largest}\n}}\n"
    ))
}

/// A module taking the top `k` of `f32[dims]` with XLA's `TopK` custom call and its
/// four-parameter greater-than comparator (TOTALORDER through the bits, as XLA writes it).
fn custom_topk(dims: &str, out: &str) -> Module {
    module(&format!(
        r#"HloModule c
gt {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  zero = s32[] constant(0)
  max = s32[] constant(2147483647)
  ba = s32[] bitcast-convert(a)
  bb = s32[] bitcast-convert(b)
  xa = s32[] xor(max, ba)
  xb = s32[] xor(max, bb)
  na = pred[] compare(ba, zero), direction=LT
  nb = pred[] compare(bb, zero), direction=LT
  ka = s32[] select(na, xa, ba)
  kb = s32[] select(nb, xb, bb)
  ROOT g = pred[] compare(ka, kb), direction=GT
}}
ENTRY e {{
  x = f32[{dims}] parameter(0)
  ROOT t = (f32[{out}], s32[{out}]) custom-call(x), custom_call_target="TopK", called_computations={{gt}}
}}
"#
    ))
}

#[test]
fn top_k_with_ties_of_the_op_and_the_custom_call() {
    for (dims, out, k) in [
        ("8,50", "8,5", 5),
        ("3,17", "3,17", 17),
        ("1", "1", 1),
        ("2,1100", "2,7", 7),
        ("4,3,33", "4,3,2", 2),
    ] {
        for largest in [true, false] {
            matches_evaluator(&topk(dims, out, k, largest), 4.0);
        }
        let m = custom_topk(dims, out);
        matches_evaluator(&m, 4.0);
    }
    // Multi-pass top-k keeps its sorted rows in scratch buffers; k = 0 launches nothing.
    let ks = plan_kernels(&topk("2,1100", "2,7", 7, true)).unwrap();
    assert!(
        ks.len() > 1 && ks.iter().all(|k| k.scratch.len() == 2),
        "{ks:?}"
    );
    assert!(plan_kernels(&topk("2,20", "2,0", 0, true))
        .unwrap()
        .is_empty());
    matches_evaluator(&topk("2,20", "2,0", 0, true), 4.0);
}

#[test]
fn sort_kernels_assemble_for_every_architecture() {
    let m = sort(&["f32", "f16", "s32"], "2,1100", 1, "LT", true);
    let p = passes(&m);
    assert!(p.len() > 1, "{p:?}");
    for ptx in ptx_checked(&m, "sort") {
        assert!(ptx.contains("bar.sync") && ptx.contains(".shared"), "{ptx}");
    }
    ptx_checked(&custom_topk("8,50", "8,5"), "topk");
    ptx_checked(&topk("3,700", "3,4", 4, false), "topk");
}

#[test]
fn unsupported_sorts_are_refused_naming_them() {
    // A comparator that is not elemental.
    let m = module(
        "HloModule u\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  \
         d = f32[] custom-call(a, b), custom_call_target=\"Foo\"\n  z = f32[] constant(0)\n  ROOT l = pred[] compare(d, z), direction=LT\n}\nENTRY e {\n  \
         x = f32[8] parameter(0)\n  ROOT s = f32[8] sort(x), dimensions={0}, to_apply=cmp\n}\n",
    );
    let e = plan_kernels(&m).expect_err("refused");
    assert_eq!(e.opcode, "custom-call", "{e}");
    assert!(e.to_string().contains("\"Foo\""), "{e}");
}
