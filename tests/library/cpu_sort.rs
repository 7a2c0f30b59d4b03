//! The `cpu` backend's sorts against the reference evaluator, bit for bit: the radix sort
//! (`codegen-cpu/src/radix.rs`, rows of 256 elements or more whose comparator is a strict
//! order on one key) on NaN of both signs, signed zeros, infinities, subnormals and many
//! duplicates, ascending and descending, 32- and 64-bit keys, keys carried with other operands
//! (stability shows in the carried values), along the last and a leading dimension; and the
//! radix sort against the comparator merge sort on the same keys (the comparator wrapped in
//! `and(.., true)`, which the radix sort does not recognize, so the merge sort runs), which
//! must give identical output. `topk` (largest and smallest first, floats and integers, small
//! and large `k`) takes the first `k` of the radix order, or keeps them by selection for
//! `k <= 8`, and must match the evaluator; XLA's `TopK` custom call with a comparator that is
//! no strict weak order (float `compare` and NaN) must too. Every radix sort runs twice: with
//! the runtime's digit passes (the JIT's default) and with generated ones (what
//! ahead-of-time objects get, `CpuOptions::sort_library` off).

use axle::analysis::eval::evaluate;
use axle::ir::literal::{f64_to_element, i128_to_element};
use axle::ir::{parse_module, ArrayLiteral, ArrayShape, Literal, Module, Shape};
use axle_codegen_cpu::{compile, CpuOptions};

/// Floats that sort in interesting ways, repeated so there are many duplicates.
const SPECIAL: &[f64] = &[
    0.0,
    -0.0,
    f64::NAN,
    -f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1e-45,
    -1e-45,
    1e-310,
    1.0,
    -1.0,
    1.5,
    -2.5,
    1e30,
];

fn hash(i: u64, seed: u64) -> u64 {
    (i ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .wrapping_mul(0xbf58_476d_1ce4_e5b9)
        .rotate_left(31)
        .wrapping_mul(0x94d0_49bb_1331_11eb)
}

/// Values for an array of `a`'s shape: special floats and a few dozen distinct values for
/// floats, small and extreme integers for integers.
fn values(a: &ArrayShape, seed: u64) -> ArrayLiteral {
    let n = a.num_elements().max(0) as u64;
    let mut data = Vec::new();
    for i in 0..n {
        let h = hash(i, seed);
        let bytes = if a.ty.is_float() {
            let v = if h.is_multiple_of(3) {
                SPECIAL[(h >> 8) as usize % SPECIAL.len()]
            } else {
                ((h >> 16) % 41) as f64 / 4.0 - 5.0
            };
            let mut b = f64_to_element(a.ty, v);
            // A NaN with a payload of its own, to see that values move bit for bit.
            if v.is_nan() && h.is_multiple_of(2) && a.ty == axle::ir::ElementType::F32 {
                let bits = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) | 0x1234;
                b = bits.to_le_bytes().to_vec();
            }
            b
        } else {
            let bits = a.ty.bits();
            let v: i128 = match h % 5 {
                0 if a.ty.is_signed_int() => -(1i128 << (bits - 1)),
                1 if a.ty.is_signed_int() => (1i128 << (bits - 1)) - 1,
                1 => (1i128 << bits) - 1,
                _ => ((h >> 16) % 19) as i128 - if a.ty.is_signed_int() { 9 } else { 0 },
            };
            i128_to_element(a.ty, v)
        };
        data.extend(bytes);
    }
    ArrayLiteral {
        shape: a.clone(),
        data,
    }
}

fn inputs(m: &Module) -> Vec<Literal> {
    m.params(m.entry())
        .iter()
        .enumerate()
        .map(|(k, &p)| match m.shape(p) {
            Shape::Array(a) => Literal::Array(values(a, 7 + k as u64)),
            _ => panic!("array parameters"),
        })
        .collect()
}

fn leaves(l: Literal) -> Vec<ArrayLiteral> {
    match l {
        Literal::Array(a) => vec![a],
        Literal::Tuple(es) => es.into_iter().flat_map(leaves).collect(),
    }
}

fn run_cpu_with(m: &Module, args: &[Literal], sort_library: bool) -> Vec<ArrayLiteral> {
    let opts = CpuOptions {
        sort_library,
        ..CpuOptions::default()
    };
    compile(m, &opts)
        .unwrap_or_else(|e| panic!("{e}"))
        .run_literals(args)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The outputs with the runtime's digit passes, checked equal to the generated passes'.
fn run_cpu(m: &Module, args: &[Literal]) -> Vec<ArrayLiteral> {
    let library = run_cpu_with(m, args, true);
    let generated = run_cpu_with(m, args, false);
    for (k, (a, b)) in library.iter().zip(&generated).enumerate() {
        assert!(
            a.data == b.data,
            "output {k}: the runtime's and the generated radix passes differ:\n{}",
            axle::ir::print_module(m)
        );
    }
    library
}

/// Module `text` gives the evaluator's outputs bit for bit on the cpu backend.
fn same_as_evaluator(text: &str) {
    let m = parse_module(text).unwrap_or_else(|e| panic!("{text}\n{e}"));
    let args = inputs(&m);
    let expected = leaves(evaluate(&m, &args).unwrap_or_else(|e| panic!("{e}")));
    let got = run_cpu(&m, &args);
    for (o, e) in expected.iter().enumerate() {
        assert!(
            e.data == got[o].data,
            "{text}: output {o} differs from the evaluator"
        );
    }
}

/// The comparator's root `compare`, or (`wrap`) the same compare behind `and(.., true)`.
fn root(cmp: &str, wrap: bool) -> String {
    if wrap {
        format!(
            "  c = pred[] {cmp}\n  t = pred[] constant(true)\n  ROOT r = pred[] and(c, t)\n}}\n"
        )
    } else {
        format!("  ROOT c = pred[] {cmp}\n}}\n")
    }
}

/// The JAX comparator of key type `ty` (NaN and -0 canonicalized, total order) over `n`
/// operands, the key first; `dir` LT or GT; `wrap` hides it from the radix sort.
fn jax_comparator(ty: &str, n: usize, dir: &str, wrap: bool) -> String {
    let mut s = String::from("cmp {\n");
    for k in 2..2 * n {
        s += &format!(
            "  p{k} = {} parameter({k})\n",
            if k < 2 { ty } else { "s32[]" }
        );
    }
    s += &format!(
        "  p0 = {ty} parameter(0)\n  p1 = {ty} parameter(1)\n  nan = {ty} constant(nan)\n  zero = {ty} constant(0)\n"
    );
    for (x, p) in [("x", "p0"), ("y", "p1")] {
        s += &format!(
            "  {x}ne = pred[] compare({p}, {p}), direction=NE\n  {x}eq = pred[] compare({p}, zero), direction=EQ\n  {x}z = {ty} select({x}eq, zero, {p})\n  {x} = {ty} select({x}ne, nan, {x}z)\n"
        );
    }
    let cmp = format!("compare(x, y), direction={dir}, type=TOTALORDER");
    s + &root(&cmp, wrap)
}

/// A comparator comparing operand 0 directly (integers: signed or unsigned by type).
fn plain_comparator(ty: &str, n: usize, dir: &str, wrap: bool) -> String {
    let mut s = String::from("cmp {\n");
    s += &format!("  p0 = {ty} parameter(0)\n  p1 = {ty} parameter(1)\n");
    for k in 2..2 * n {
        s += &format!("  p{k} = s32[] parameter({k})\n");
    }
    let cmp = format!("compare(p0, p1), direction={dir}");
    s + &root(&cmp, wrap)
}

/// A module sorting `key` (shape text) along `dim`, with `extra` s32 operands of the same
/// dimensions carried along.
fn module(comparator: &str, key_ty: &str, dims: &str, dim: usize, extra: usize) -> Module {
    let mut s = format!(
        "HloModule sort\n\n{comparator}\nENTRY main {{\n  k = {key_ty}[{dims}] parameter(0)\n"
    );
    let mut ops = vec!["k".to_string()];
    let mut tys = vec![format!("{key_ty}[{dims}]")];
    for e in 0..extra {
        s += &format!("  v{e} = s32[{dims}] parameter({})\n", e + 1);
        ops.push(format!("v{e}"));
        tys.push(format!("s32[{dims}]"));
    }
    let shape = if extra == 0 {
        tys[0].clone()
    } else {
        format!("({})", tys.join(", "))
    };
    s += &format!(
        "  ROOT s = {shape} sort({}), dimensions={{{dim}}}, is_stable=true, to_apply=cmp\n}}\n",
        ops.join(", ")
    );
    parse_module(&s).unwrap_or_else(|e| panic!("{s}\n{e}"))
}

/// The cpu backend equals the evaluator bit for bit, and the radix sort equals the merge sort.
fn check(make: &dyn Fn(bool) -> Module) {
    let m = make(false);
    let args = inputs(&m);
    let expected = leaves(evaluate(&m, &args).unwrap_or_else(|e| panic!("{e}")));
    let radix = run_cpu(&m, &args);
    let merge = run_cpu(&make(true), &args);
    for (k, e) in expected.iter().enumerate() {
        assert!(
            e.data == radix[k].data,
            "output {k} differs from the evaluator:\n{}",
            axle::ir::print_module(&m)
        );
        assert!(
            radix[k].data == merge[k].data,
            "output {k}: radix and merge sort differ:\n{}",
            axle::ir::print_module(&m)
        );
    }
}

#[test]
fn jax_float_sort_keeps_nan_and_signed_zero_bits() {
    for dir in ["LT", "GT"] {
        check(&|w| module(&jax_comparator("f32[]", 1, dir, w), "f32", "3,1000", 1, 0));
        check(&|w| module(&jax_comparator("f64[]", 1, dir, w), "f64", "700", 0, 0));
    }
}

#[test]
fn key_value_sorts_are_stable() {
    // argsort: keys with many duplicates carry their positions along.
    check(&|w| module(&jax_comparator("f32[]", 2, "LT", w), "f32", "2,600", 1, 1));
    check(&|w| module(&jax_comparator("f64[]", 3, "GT", w), "f64", "513", 0, 2));
    // Sorted along a leading dimension.
    check(&|w| module(&jax_comparator("f32[]", 2, "LT", w), "f32", "400,3", 0, 1));
}

#[test]
fn integer_keys_of_every_width() {
    for ty in ["s32", "u32", "s64", "u64", "s8", "u16"] {
        for dir in ["LT", "GT"] {
            check(&|w| {
                module(
                    &plain_comparator(&format!("{ty}[]"), 2, dir, w),
                    ty,
                    "300",
                    0,
                    1,
                )
            });
        }
    }
}

#[test]
fn total_order_without_canonicalization() {
    let cmp = |w: bool| {
        "cmp {\n  p0 = f32[] parameter(0)\n  p1 = f32[] parameter(1)\n".to_string()
            + &root("compare(p0, p1), direction=LT, type=TOTALORDER", w)
    };
    check(&|w| module(&cmp(w), "f32", "1000", 0, 0));
}

#[test]
fn topk_takes_the_first_k_in_total_order() {
    for (ty, largest) in [
        ("f32", true),
        ("f32", false),
        ("f64", true),
        ("s32", true),
        ("u16", false),
    ] {
        // Selection (k <= 8, rows as long as k too) and the radix sort (k = 9, 300).
        for (len, k) in [
            (700, 1),
            (700, 5),
            (700, 8),
            (700, 9),
            (700, 300),
            (8, 8),
            (9, 3),
        ] {
            let text = format!(
                "HloModule t\nENTRY main {{\n  x = {ty}[3,{len}] parameter(0)\n  ROOT t = ({ty}[3,{k}], s32[3,{k}]) topk(x), k={k}, largest={largest}\n}}\n"
            );
            same_as_evaluator(&text);
        }
    }
}

#[test]
fn topk_custom_call_keeps_the_stable_sort_of_its_comparator() {
    // XLA's `TopK` custom call with a plain float `compare`, which is no strict weak order once
    // NaN is among the values: only the stable sort (the evaluator's) gives the evaluator's
    // first `k`, so small `k` must not take the selection that the `topk` op takes.
    for (dir, k) in [("GT", 4), ("LT", 8), ("GT", 40)] {
        let text = format!(
            "HloModule t\ncmp {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  \
             ROOT c = pred[] compare(a, b), direction={dir}\n}}\nENTRY main {{\n  \
             x = f32[5,300] parameter(0)\n  ROOT t = (f32[5,{k}], s32[5,{k}]) custom-call(x), \
             custom_call_target=\"TopK\", called_computations={{cmp}}\n}}\n"
        );
        same_as_evaluator(&text);
    }
}
