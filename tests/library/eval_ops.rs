//! Per-op-family tests of the reference evaluator with hand-computed expectations, edge cases
//! first: NaN, ±0, ±inf, subnormals, `INT_MIN / -1`, division and remainder by zero, shifts by
//! at least the bit width, convert saturation, f16/bf16 rounding ties, out-of-range dynamic
//! starts, zero-sized dimensions and scalars.
//!
//! Every case also runs on the CPU backend (with the C library's transcendentals, as the
//! evaluator uses), which must give the evaluator's results exactly (NaN for NaN, signed zeros
//! included), and must refuse what the evaluator refuses.

use axle::analysis::{evaluate, evaluate_with, EvalError, EvalOptions};
use axle::ir::{compare_arrays, ArrayLiteral, ArrayShape, ElementType, Literal, Module, Tolerance};
use axle_codegen_cpu::{compile, CpuOptions};
use half::{bf16, f16};

// ---------------------------------------------------------------------------------------------
// Helpers.

fn parse(text: &str) -> Module {
    axle::ir::parser::parse_module(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn leaves(l: &Literal) -> Vec<&ArrayLiteral> {
    match l {
        Literal::Array(a) => vec![a],
        Literal::Tuple(v) => v.iter().flat_map(leaves).collect(),
    }
}

/// Runs `m` on the CPU backend (the C library's transcendentals, subnormals flushed or not).
fn run_cpu(
    m: &Module,
    args: &[Literal],
    flush_denormals: bool,
) -> Result<Vec<ArrayLiteral>, String> {
    let opts = CpuOptions {
        libm_math: true,
        flush_denormals,
        ..Default::default()
    };
    let exe = compile(m, &opts).map_err(|e| e.to_string())?;
    exe.run_literals(args).map_err(|e| e.to_string())
}

/// The CPU backend's results must be the evaluator's, bit for bit up to NaN payloads.
fn check_cpu(m: &Module, args: &[Literal], want: &Literal, flush_denormals: bool) {
    check_cpu_within(m, args, want, flush_denormals, Tolerance::Exact)
}

/// The CPU backend's results must be the evaluator's within `tol`.
fn check_cpu_within(
    m: &Module,
    args: &[Literal],
    want: &Literal,
    flush_denormals: bool,
    tol: Tolerance,
) {
    let got = run_cpu(m, args, flush_denormals)
        .unwrap_or_else(|e| panic!("cpu: {e}\n{}", axle::ir::print_module(m)));
    let want = leaves(want);
    assert_eq!(got.len(), want.len(), "cpu: number of result leaves");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        if let Err(e) = compare_arrays(w, g, tol) {
            panic!(
                "cpu result {k} differs from the evaluator's: {e}\n{}",
                axle::ir::print_module(m)
            );
        }
    }
}

fn run(text: &str, args: &[Literal]) -> Literal {
    let m = parse(text);
    let want = evaluate(&m, args).unwrap_or_else(|e| panic!("{e}"));
    check_cpu(&m, args, &want, true);
    want
}

/// [`run`] for ops whose results depend on the algorithm's operation order (FFT: the evaluator
/// works in f64, the CPU runtime in the op's precision): the CPU backend within a few ulps.
fn run_close(text: &str, args: &[Literal]) -> Literal {
    let m = parse(text);
    let want = evaluate(&m, args).unwrap_or_else(|e| panic!("{e}"));
    let tol = Tolerance::Close {
        rtol: 1e-6,
        atol: 1e-6,
    };
    check_cpu_within(&m, args, &want, true, tol);
    want
}

/// A narrow-float reduction over a zero-sized dimension beside one of 2^61 is its init at once
/// in the evaluator's tree order (hostile_fuzz found the evaluator walking the positions of
/// such an empty window), and on the cpu backend, unfused and with its pipeline.
#[test]
fn tree_order_reduction_of_an_empty_huge_array_is_its_init() {
    let text = module(
        "add { a = bf16[] parameter(0)\n b = bf16[] parameter(1)\n ROOT s = bf16[] add(a, b) }",
        &["bf16[2305843009213693952,0]"],
        "z = bf16[] constant(1.5)\nr = bf16[] reduce(p0, z), dimensions={0,1}, to_apply=add",
    );
    let m = parse(&text);
    let arg = Literal::Array(
        ArrayLiteral::new(
            ArrayShape::new(ElementType::BF16, &[1 << 61, 0]),
            Vec::new(),
        )
        .expect("an empty literal"),
    );
    let got = evaluate(&m, std::slice::from_ref(&arg)).unwrap_or_else(|e| panic!("{e}"));
    let want = Literal::Array(
        ArrayLiteral::new(
            ArrayShape::new(ElementType::BF16, &[]),
            bf16::from_f32(1.5).to_le_bytes().to_vec(),
        )
        .expect("a scalar literal"),
    );
    assert_eq!(got, want);
    check_cpu(&m, &[arg], &want, true);
}

fn run_err(text: &str, args: &[Literal]) -> EvalError {
    let m = parse(text);
    match evaluate(&m, args) {
        Ok(l) => panic!("expected an error, got {l:?}"),
        Err(e) => {
            if let Ok(r) = run_cpu(&m, args, true) {
                panic!("the evaluator refuses ({e}), the cpu backend gave {r:?}");
            }
            e
        }
    }
}

/// A module whose entry takes `params` (HLO shapes) and computes `body` (instructions, the
/// last one ROOT), plus extra computations before it.
fn module(comps: &str, params: &[&str], body: &str) -> String {
    let mut s = String::from("HloModule m\n\n");
    s.push_str(comps);
    s.push_str("\nENTRY main {\n");
    for (i, p) in params.iter().enumerate() {
        s.push_str(&format!("  p{i} = {p} parameter({i})\n"));
    }
    let lines: Vec<&str> = body
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    for (i, l) in lines.iter().enumerate() {
        if i + 1 == lines.len() {
            s.push_str(&format!("  ROOT {l}\n"));
        } else {
            s.push_str(&format!("  {l}\n"));
        }
    }
    s.push_str("}\n");
    s
}

fn lit<T: Copy>(ty: ElementType, dims: &[i64], v: &[T], enc: impl Fn(T) -> Vec<u8>) -> Literal {
    assert_eq!(dims.iter().product::<i64>() as usize, v.len());
    Literal::Array(ArrayLiteral {
        shape: ArrayShape::new(ty, dims),
        data: v.iter().flat_map(|&x| enc(x)).collect(),
    })
}

fn f32s(dims: &[i64], v: &[f32]) -> Literal {
    lit(ElementType::F32, dims, v, |x| x.to_le_bytes().to_vec())
}
fn f64s(dims: &[i64], v: &[f64]) -> Literal {
    lit(ElementType::F64, dims, v, |x| x.to_le_bytes().to_vec())
}
fn s32s(dims: &[i64], v: &[i32]) -> Literal {
    lit(ElementType::S32, dims, v, |x| x.to_le_bytes().to_vec())
}
fn u32s(dims: &[i64], v: &[u32]) -> Literal {
    lit(ElementType::U32, dims, v, |x| x.to_le_bytes().to_vec())
}
fn s8s(dims: &[i64], v: &[i8]) -> Literal {
    lit(ElementType::S8, dims, v, |x| x.to_le_bytes().to_vec())
}
fn u8s(dims: &[i64], v: &[u8]) -> Literal {
    lit(ElementType::U8, dims, v, |x| vec![x])
}
fn f16s(dims: &[i64], v: &[f32]) -> Literal {
    lit(ElementType::F16, dims, v, |x| {
        f16::from_f32(x).to_le_bytes().to_vec()
    })
}
fn bf16s(dims: &[i64], v: &[f32]) -> Literal {
    lit(ElementType::BF16, dims, v, |x| {
        bf16::from_f32(x).to_le_bytes().to_vec()
    })
}
fn preds(dims: &[i64], v: &[bool]) -> Literal {
    lit(ElementType::Pred, dims, v, |x| vec![x as u8])
}

fn arr(l: &Literal) -> &ArrayLiteral {
    l.as_array().expect("an array")
}
fn tuple(l: &Literal) -> &[Literal] {
    match l {
        Literal::Tuple(v) => v,
        _ => panic!("expected a tuple"),
    }
}
fn dims(l: &Literal) -> Vec<i64> {
    arr(l).shape.dims.to_vec()
}
fn get<T>(l: &Literal, w: usize, dec: impl Fn(&[u8]) -> T) -> Vec<T> {
    arr(l).data.chunks_exact(w).map(dec).collect()
}
fn as_f32(l: &Literal) -> Vec<f32> {
    assert_eq!(arr(l).ty(), ElementType::F32);
    get(l, 4, |b| f32::from_le_bytes(b.try_into().unwrap()))
}
fn as_f64(l: &Literal) -> Vec<f64> {
    assert_eq!(arr(l).ty(), ElementType::F64);
    get(l, 8, |b| f64::from_le_bytes(b.try_into().unwrap()))
}
fn as_s32(l: &Literal) -> Vec<i32> {
    assert_eq!(arr(l).ty(), ElementType::S32);
    get(l, 4, |b| i32::from_le_bytes(b.try_into().unwrap()))
}
fn as_u32(l: &Literal) -> Vec<u32> {
    assert_eq!(arr(l).ty(), ElementType::U32);
    get(l, 4, |b| u32::from_le_bytes(b.try_into().unwrap()))
}
fn as_u64(l: &Literal) -> Vec<u64> {
    assert_eq!(arr(l).ty(), ElementType::U64);
    get(l, 8, |b| u64::from_le_bytes(b.try_into().unwrap()))
}
fn as_s8(l: &Literal) -> Vec<i8> {
    assert_eq!(arr(l).ty(), ElementType::S8);
    get(l, 1, |b| b[0] as i8)
}
fn as_u8(l: &Literal) -> Vec<u8> {
    assert_eq!(arr(l).ty(), ElementType::U8);
    get(l, 1, |b| b[0])
}
fn as_pred(l: &Literal) -> Vec<bool> {
    assert_eq!(arr(l).ty(), ElementType::Pred);
    get(l, 1, |b| b[0] != 0)
}
fn as_f16(l: &Literal) -> Vec<f32> {
    assert_eq!(arr(l).ty(), ElementType::F16);
    get(l, 2, |b| f16::from_le_bytes([b[0], b[1]]).to_f32())
}
fn as_bf16(l: &Literal) -> Vec<f32> {
    assert_eq!(arr(l).ty(), ElementType::BF16);
    get(l, 2, |b| bf16::from_le_bytes([b[0], b[1]]).to_f32())
}

/// Bitwise float equality with NaN matching NaN.
fn same_f32(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits(),
            "element {i}: got {g:?} want {w:?} (all: {got:?})"
        );
    }
}

fn unary_f32(op: &str, x: &[f32]) -> Vec<f32> {
    let n = x.len() as i64;
    let t = module(
        "",
        &[&format!("f32[{n}]")],
        &format!("r = f32[{n}] {op}(p0)"),
    );
    as_f32(&run(&t, &[f32s(&[n], x)]))
}

fn binary(ty: &str, op: &str, a: Literal, b: Literal) -> Literal {
    let n = dims(&a)[0];
    let t = module(
        "",
        &[&format!("{ty}[{n}]"), &format!("{ty}[{n}]")],
        &format!("r = {ty}[{n}] {op}(p0, p1)"),
    );
    run(&t, &[a, b])
}

#[test]
fn pred_add_is_or_and_multiply_is_and() {
    // As XLA's fusion rewrites them (`add` on `pred` to `or`); `subtract` stays refused.
    let a = preds(&[4], &[false, false, true, true]);
    let b = preds(&[4], &[false, true, false, true]);
    let sum = binary("pred", "add", a.clone(), b.clone());
    assert_eq!(as_pred(&sum), vec![false, true, true, true]);
    let product = binary("pred", "multiply", a, b);
    assert_eq!(as_pred(&product), vec![false, false, false, true]);
    let text = module("", &["pred[2]", "pred[2]"], "r = pred[2] subtract(p0, p1)");
    let err = axle::ir::parser::parse_module(&text)
        .map_err(|e| e.to_string())
        .and_then(|m| axle::verify_module(&m).map_err(|e| e.to_string()))
        .expect_err("subtract on pred is refused");
    assert!(err.contains("pred"), "{err}");
}

#[test]
fn dot_algorithms_compute_at_the_operands_precision() {
    let body = |alg: &str| {
        format!(
            "r = f32[2,2] dot(p0, p1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}{alg}"
        )
    };
    let params = ["f32[2,3]", "f32[3,2]"];
    let a = f32s(&[2, 3], &[0.5, 2.5, -3.0, 4.0, 5.0, 6.0]);
    let b = f32s(&[3, 2], &[0.25, 2.0, 3.0, -4.0, 5.0, 6.0]);
    let plain = run(&module("", &params, &body("")), &[a.clone(), b.clone()]);
    for alg in [
        "dot_bf16_bf16_f32",
        "dot_tf32_tf32_f32_x3",
        "ALG_DOT_F32_F32_F32",
    ] {
        let got = run(
            &module("", &params, &body(&format!(", algorithm={alg}"))),
            &[a.clone(), b.clone()],
        );
        same_f32(&as_f32(&got), &as_f32(&plain));
    }
    let text = module("", &params, &body(", algorithm=dot_f7_f7_f7"));
    let err = axle::ir::parser::parse_module(&text)
        .map_err(|e| e.to_string())
        .and_then(|m| axle::verify_module(&m).map_err(|e| e.to_string()))
        .expect_err("an unknown algorithm is refused");
    assert!(err.contains("dot_f7_f7_f7"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Integer arithmetic.

#[test]
fn signed_division_and_remainder_follow_xla() {
    let a = s32s(&[6], &[7, -7, i32::MIN, 5, 0, i32::MIN]);
    let b = s32s(&[6], &[0, 2, -1, 0, 3, 1]);
    let q = binary("s32", "divide", a.clone(), b.clone());
    // x / 0 = -1, INT_MIN / -1 = INT_MIN, truncation toward zero.
    assert_eq!(as_s32(&q), vec![-1, -3, i32::MIN, -1, 0, i32::MIN]);
    let r = binary("s32", "remainder", a, b);
    // x % 0 = x, INT_MIN % -1 = 0, the sign follows the dividend.
    assert_eq!(as_s32(&r), vec![7, -1, 0, 5, 0, 0]);
}

#[test]
fn unsigned_division_by_zero_is_all_ones() {
    let a = u32s(&[3], &[7, 0, u32::MAX]);
    let b = u32s(&[3], &[0, 0, 2]);
    assert_eq!(
        as_u32(&binary("u32", "divide", a.clone(), b.clone())),
        vec![u32::MAX, u32::MAX, u32::MAX / 2]
    );
    assert_eq!(as_u32(&binary("u32", "remainder", a, b)), vec![7, 0, 1]);
}

#[test]
fn s8_division_edge_cases() {
    let a = s8s(&[3], &[i8::MIN, 100, -100]);
    let b = s8s(&[3], &[-1, 0, 0]);
    assert_eq!(
        as_s8(&binary("s8", "divide", a.clone(), b.clone())),
        vec![i8::MIN, -1, -1]
    );
    assert_eq!(as_s8(&binary("s8", "remainder", a, b)), vec![0, 100, -100]);
}

#[test]
fn integer_arithmetic_wraps() {
    let a = s32s(&[3], &[i32::MAX, i32::MIN, 65536]);
    let b = s32s(&[3], &[1, 1, 65536]);
    assert_eq!(
        as_s32(&binary("s32", "add", a.clone(), b.clone())),
        vec![i32::MIN, i32::MIN + 1, 131072]
    );
    assert_eq!(
        as_s32(&binary("s32", "subtract", a.clone(), b.clone())),
        vec![i32::MAX - 1, i32::MAX, 0]
    );
    assert_eq!(
        as_s32(&binary("s32", "multiply", a, b)),
        vec![i32::MAX, i32::MIN, 0]
    );
    let t = module(
        "",
        &["s32[2]"],
        "n = s32[2] negate(p0)\na = s32[2] abs(p0)\nr = (s32[2], s32[2]) tuple(n, a)",
    );
    let r = run(&t, &[s32s(&[2], &[i32::MIN, -5])]);
    assert_eq!(as_s32(&tuple(&r)[0]), vec![i32::MIN, 5]);
    assert_eq!(as_s32(&tuple(&r)[1]), vec![i32::MIN, 5]);
}

#[test]
fn shifts_by_at_least_the_bit_width() {
    let x = s32s(&[6], &[1, -8, -8, 5, i32::MIN, 3]);
    let n = s32s(&[6], &[32, 40, 1, -1, 31, 0]);
    assert_eq!(
        as_s32(&binary("s32", "shift-left", x.clone(), n.clone())),
        vec![0, 0, -16, 0, 0, 3]
    );
    // Arithmetic right shifts by >= 32 (or a negative amount) leave only the sign.
    assert_eq!(
        as_s32(&binary(
            "s32",
            "shift-right-arithmetic",
            x.clone(),
            n.clone()
        )),
        vec![0, -1, -4, 0, -1, 3]
    );
    assert_eq!(
        as_s32(&binary("s32", "shift-right-logical", x, n)),
        vec![0, 0, 0x7fff_fffc, 0, 1, 3]
    );
    let x = u8s(&[4], &[0x81, 0x81, 0x81, 0xff]);
    let n = u8s(&[4], &[8, 7, 255, 1]);
    assert_eq!(
        as_u8(&binary("u8", "shift-left", x.clone(), n.clone())),
        vec![0, 0x80, 0, 0xfe]
    );
    assert_eq!(
        as_u8(&binary(
            "u8",
            "shift-right-arithmetic",
            x.clone(),
            n.clone()
        )),
        vec![0xff, 0xff, 0xff, 0xff]
    );
    assert_eq!(
        as_u8(&binary("u8", "shift-right-logical", x, n)),
        vec![0, 1, 0, 0x7f]
    );
}

#[test]
fn integer_power_min_max_and_bit_counts() {
    let a = s32s(&[5], &[2, 3, 1, -2, 5]);
    let b = s32s(&[5], &[10, 21, -3, 3, -1]);
    // 3^21 wraps; a negative exponent gives 1 for base 1, else 0.
    assert_eq!(
        as_s32(&binary("s32", "power", a.clone(), b.clone())),
        vec![1024, 3i32.wrapping_pow(21), 1, -8, 0]
    );
    // As on XLA's CPU backend: only the low six exponent bits count, and -1 to a negative
    // power is ±1 by parity.
    let p = binary(
        "s32",
        "power",
        s32s(&[4], &[3, 3, -1, -1]),
        s32s(&[4], &[64, 65, -5, -4]),
    );
    assert_eq!(as_s32(&p), vec![1, 3, -1, 1]);
    assert_eq!(
        as_s32(&binary("s32", "maximum", a.clone(), b.clone())),
        vec![10, 21, 1, 3, 5]
    );
    assert_eq!(
        as_s32(&binary("s32", "minimum", a, b)),
        vec![2, 3, -3, -2, -1]
    );
    let t = module(
        "",
        &["s32[4]"],
        "c = s32[4] count-leading-zeros(p0)\np = s32[4] popcnt(p0)\ns = s32[4] sign(p0)\nn = s32[4] not(p0)\nr = (s32[4], s32[4], s32[4], s32[4]) tuple(c, p, s, n)",
    );
    let r = run(&t, &[s32s(&[4], &[0, 1, -1, 0x00ff_0000])]);
    let r = tuple(&r);
    assert_eq!(as_s32(&r[0]), vec![32, 31, 0, 8]);
    assert_eq!(as_s32(&r[1]), vec![0, 1, 32, 8]);
    assert_eq!(as_s32(&r[2]), vec![0, 1, -1, 1]);
    assert_eq!(as_s32(&r[3]), vec![-1, -2, 0, !0x00ff_0000]);
}

// ---------------------------------------------------------------------------------------------
// Floats.

#[test]
fn maximum_and_minimum_propagate_nan() {
    let nan = f32::NAN;
    let a = f32s(&[6], &[nan, 1.0, nan, 2.0, f32::NEG_INFINITY, -0.0]);
    let b = f32s(&[6], &[1.0, nan, nan, -3.0, 5.0, 0.0]);
    // Zeros compare as -0 < +0 (IEEE 754-2019 maximum and minimum, as XLA's CPU backend).
    same_f32(
        &as_f32(&binary("f32", "maximum", a.clone(), b.clone())),
        &[nan, nan, nan, 2.0, 5.0, 0.0],
    );
    same_f32(
        &as_f32(&binary("f32", "minimum", a, b)),
        &[nan, nan, nan, -3.0, f32::NEG_INFINITY, -0.0],
    );
    let a = f32s(&[2], &[0.0, -0.0]);
    let b = f32s(&[2], &[-0.0, -0.0]);
    same_f32(
        &as_f32(&binary("f32", "maximum", a.clone(), b.clone())),
        &[0.0, -0.0],
    );
    same_f32(&as_f32(&binary("f32", "minimum", a, b)), &[-0.0, -0.0]);
}

#[test]
fn float_division_remainder_and_power_special_values() {
    let nan = f32::NAN;
    let inf = f32::INFINITY;
    let a = f32s(&[6], &[1.0, -1.0, 0.0, 5.5, -5.5, inf]);
    let b = f32s(&[6], &[0.0, 0.0, 0.0, 2.0, 2.0, 2.0]);
    same_f32(
        &as_f32(&binary("f32", "divide", a.clone(), b.clone())),
        &[inf, -inf, nan, 2.75, -2.75, inf],
    );
    // fmod: the sign follows the dividend, x % 0 is NaN.
    same_f32(
        &as_f32(&binary("f32", "remainder", a, b)),
        &[nan, nan, nan, 1.5, -1.5, nan],
    );
    let a = f32s(&[5], &[0.0, nan, 1.0, -8.0, 2.0]);
    let b = f32s(&[5], &[0.0, 0.0, nan, 1.0 / 3.0, -1.0]);
    same_f32(
        &as_f32(&binary("f32", "power", a, b)),
        &[1.0, 1.0, 1.0, nan, 0.5],
    );
}

#[test]
fn rounding_ops_on_ties() {
    let x = [0.5f32, 1.5, 2.5, -0.5, -2.5, -0.0, 3.7];
    same_f32(
        &unary_f32("round-nearest-even", &x),
        &[0.0, 2.0, 2.0, -0.0, -2.0, -0.0, 4.0],
    );
    same_f32(
        &unary_f32("round-nearest-afz", &x),
        &[1.0, 2.0, 3.0, -1.0, -3.0, -0.0, 4.0],
    );
    same_f32(
        &unary_f32("floor", &x),
        &[0.0, 1.0, 2.0, -1.0, -3.0, -0.0, 3.0],
    );
    same_f32(
        &unary_f32("ceil", &x),
        &[1.0, 2.0, 3.0, -0.0, -2.0, -0.0, 4.0],
    );
}

#[test]
fn sign_abs_negate_and_is_finite_on_special_values() {
    let nan = f32::NAN;
    let inf = f32::INFINITY;
    let x = [nan, inf, -inf, 0.0, -0.0, -2.5, 1e-45];
    same_f32(
        &unary_f32("sign", &x),
        // The subnormal reads as zero (XLA's CPU backend runs with DAZ).
        &[nan, 1.0, -1.0, 0.0, -0.0, -1.0, 0.0],
    );
    same_f32(
        &unary_f32("abs", &x),
        &[nan, inf, inf, 0.0, 0.0, 2.5, 1e-45],
    );
    same_f32(
        &unary_f32("negate", &x),
        &[nan, -inf, inf, -0.0, 0.0, 2.5, -1e-45],
    );
    let t = module("", &["f32[7]"], "r = pred[7] is-finite(p0)");
    assert_eq!(
        as_pred(&run(&t, &[f32s(&[7], &x)])),
        vec![false, false, false, true, true, true, true]
    );
}

#[test]
fn subnormals_flush_like_xla_cpu_by_default() {
    // XLA's CPU backend runs float arithmetic with DAZ and FTZ: subnormal operands read as
    // zero, subnormal results are written as zero. Sign-bit ops stay exact.
    let tiny = f32::from_bits(1);
    let a = f32s(&[3], &[tiny, 1e-38, -tiny]);
    let b = f32s(&[3], &[tiny, 0.5, 0.0]);
    // 1e-38 is subnormal too; -0 + +0 is +0.
    same_f32(
        &as_f32(&binary("f32", "add", a.clone(), b.clone())),
        &[0.0, 0.5, 0.0],
    );
    same_f32(&as_f32(&binary("f32", "multiply", a, b)), &[0.0, 0.0, -0.0]);
    same_f32(&unary_f32("negate", &[tiny]), &[-tiny]);
    same_f32(&unary_f32("abs", &[-tiny]), &[tiny]);
    same_f32(&unary_f32("floor", &[-tiny]), &[-0.0]);
    let t = module(
        "",
        &["f32[1]", "f32[1]"],
        "r = pred[1] compare(p0, p1), direction=EQ",
    );
    let r = run(&t, &[f32s(&[1], &[tiny]), f32s(&[1], &[0.0])]);
    assert_eq!(as_pred(&r), vec![true]);
}

#[test]
fn subnormals_survive_without_flushing() {
    let opts = EvalOptions {
        flush_denormals: false,
    };
    let ieee = |text: &str, args: &[Literal]| {
        let m = parse(text);
        let want = evaluate_with(&m, args, &opts).unwrap();
        check_cpu(&m, args, &want, false);
        want
    };
    let tiny = f32::from_bits(1);
    let t = module(
        "",
        &["f32[3]", "f32[3]"],
        "a = f32[3] add(p0, p1)\nm = f32[3] multiply(p0, p1)\nr = (f32[3], f32[3]) tuple(a, m)",
    );
    let r = ieee(
        &t,
        &[
            f32s(&[3], &[tiny, 1e-38, -tiny]),
            f32s(&[3], &[tiny, 0.5, tiny]),
        ],
    );
    same_f32(
        &as_f32(&tuple(&r)[0]),
        &[f32::from_bits(2), 1e-38 + 0.5, 0.0],
    );
    same_f32(&as_f32(&tuple(&r)[1]), &[0.0, 1e-38 * 0.5, -0.0]);
    let t = module("", &["f32[2]"], "r = f64[2] convert(p0)");
    let r = ieee(&t, &[f32s(&[2], &[tiny, -1e-40])]);
    assert_eq!(as_f64(&r), vec![tiny as f64, -1e-40f32 as f64]);
}

#[test]
fn transcendentals_match_libm() {
    let check = |op: &str, x: &[f32], f: fn(f32) -> f32| {
        for (g, &v) in unary_f32(op, x).iter().zip(x) {
            let w = f(v);
            assert!(
                (g - w).abs() <= 1e-6 * w.abs().max(1.0),
                "{op}({v}): {g} vs {w}"
            );
        }
    };
    let x = [0.5f32, -1.25, 2.0];
    check("exponential", &x, f32::exp);
    check("exponential-minus-one", &x, f32::exp_m1);
    check("log-plus-one", &[0.5, 1.25, 2.0], f32::ln_1p);
    check("tanh", &x, f32::tanh);
    check("cbrt", &x, f32::cbrt);
    check("sine", &x, f32::sin);
    check("cosine", &x, f32::cos);
    check("tan", &x, f32::tan);
    check("logistic", &x, |v| 1.0 / (1.0 + (-v).exp()));
    check("erf", &x, |v| erf_series(v as f64) as f32);
    same_f32(
        &unary_f32("sqrt", &[-1.0, 4.0, -0.0]),
        &[f32::NAN, 2.0, -0.0],
    );
    same_f32(&unary_f32("rsqrt", &[4.0, 0.0]), &[0.5, f32::INFINITY]);
    same_f32(
        &unary_f32("log", &[0.0, -1.0]),
        &[f32::NEG_INFINITY, f32::NAN],
    );
    let y = f32s(&[4], &[0.0, -0.0, 1.0, -1.0]);
    let xx = f32s(&[4], &[-1.0, -1.0, 0.0, 0.0]);
    let r = as_f32(&binary("f32", "atan2", y, xx));
    same_f32(
        &r,
        &[
            std::f32::consts::PI,
            -std::f32::consts::PI,
            std::f32::consts::FRAC_PI_2,
            -std::f32::consts::FRAC_PI_2,
        ],
    );
}

/// erf by its Taylor series (enough terms for |x| <= 2).
fn erf_series(x: f64) -> f64 {
    let mut sum = 0.0;
    let mut term = x;
    for n in 0..60 {
        sum += term / (2 * n + 1) as f64;
        term *= -x * x / (n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

#[test]
fn bf16_arithmetic_rounds_ties_to_even_after_each_op() {
    let h = 2f32.powi(-8); // half an ulp of bf16 at 1.0
    let a = bf16s(&[3], &[1.0, 1.0 + 2.0 * h, 256.0]);
    let b = bf16s(&[3], &[h, h, 1.0]);
    // 1 + h ties to 1 (even); (1 + 2h) + h ties to 1 + 4h (even); 256 + 1 ties to 256.
    assert_eq!(
        as_bf16(&binary("bf16", "add", a, b)),
        vec![1.0, 1.0 + 4.0 * h, 256.0]
    );
    // Chained ops round in between: (1 + h) + h is 1 in bf16, not 1 + 2h.
    let t = module(
        "",
        &["bf16[1]", "bf16[1]"],
        "a = bf16[1] add(p0, p1)\nr = bf16[1] add(a, p1)",
    );
    let r = run(&t, &[bf16s(&[1], &[1.0]), bf16s(&[1], &[h])]);
    assert_eq!(as_bf16(&r), vec![1.0]);
}

#[test]
fn f16_arithmetic_rounds_ties_to_even() {
    let h = 2f32.powi(-11); // half an ulp of f16 at 1.0
    let a = f16s(&[3], &[1.0, 1.0 + 2.0 * h, 65504.0]);
    let b = f16s(&[3], &[h, h, 16.0]);
    // 65504 + 16 is a tie between 65504 and 65536 (inf): to even is inf.
    assert_eq!(
        as_f16(&binary("f16", "add", a, b)),
        vec![1.0, 1.0 + 4.0 * h, f32::INFINITY]
    );
}

#[test]
fn compare_every_direction_with_nan_and_signed_zero() {
    let nan = f32::NAN;
    let a = f32s(&[5], &[nan, 1.0, -0.0, 2.0, nan]);
    let b = f32s(&[5], &[1.0, nan, 0.0, 2.0, nan]);
    let cmp = |dir: &str, ty: &str| {
        let t = module(
            "",
            &["f32[5]", "f32[5]"],
            &format!("r = pred[5] compare(p0, p1), direction={dir}{ty}"),
        );
        as_pred(&run(&t, &[a.clone(), b.clone()]))
    };
    let (f, t) = (false, true);
    assert_eq!(cmp("EQ", ""), vec![f, f, t, t, f]);
    assert_eq!(cmp("NE", ""), vec![t, t, f, f, t]);
    assert_eq!(cmp("LT", ""), vec![f, f, f, f, f]);
    assert_eq!(cmp("LE", ""), vec![f, f, t, t, f]);
    assert_eq!(cmp("GT", ""), vec![f, f, f, f, f]);
    assert_eq!(cmp("GE", ""), vec![f, f, t, t, f]);
    // Total order: -0 < +0, NaN above everything, NaN == NaN.
    assert_eq!(cmp("LT", ", type=TOTALORDER"), vec![f, t, t, f, f]);
    assert_eq!(cmp("EQ", ", type=TOTALORDER"), vec![f, f, f, t, t]);
    assert_eq!(cmp("GT", ", type=TOTALORDER"), vec![t, f, f, f, f]);
    // Negative NaN sorts below -inf.
    let t = module(
        "",
        &["f32[2]", "f32[2]"],
        "r = pred[2] compare(p0, p1), direction=LT, type=TOTALORDER",
    );
    let r = run(
        &t,
        &[
            f32s(&[2], &[-nan, f32::NEG_INFINITY]),
            f32s(&[2], &[f32::NEG_INFINITY, -nan]),
        ],
    );
    assert_eq!(as_pred(&r), vec![true, false]);
    // Unsigned integer comparison.
    let t = module(
        "",
        &["u32[2]", "u32[2]"],
        "r = pred[2] compare(p0, p1), direction=LT",
    );
    let r = run(
        &t,
        &[u32s(&[2], &[u32::MAX, 1]), u32s(&[2], &[1, u32::MAX])],
    );
    assert_eq!(as_pred(&r), vec![false, true]);
}

#[test]
fn select_and_clamp() {
    let nan = f32::NAN;
    let t = module(
        "",
        &["pred[3]", "f32[3]", "f32[3]"],
        "r = f32[3] select(p0, p1, p2)",
    );
    let r = run(
        &t,
        &[
            preds(&[3], &[true, false, true]),
            f32s(&[3], &[1.0, 2.0, 3.0]),
            f32s(&[3], &[-1.0, -2.0, -3.0]),
        ],
    );
    same_f32(&as_f32(&r), &[1.0, -2.0, 3.0]);
    // Scalar bounds broadcast; NaN propagates.
    let t = module(
        "",
        &["f32[]", "f32[4]", "f32[]"],
        "r = f32[4] clamp(p0, p1, p2)",
    );
    let r = run(
        &t,
        &[
            f32s(&[], &[-1.0]),
            f32s(&[4], &[-5.0, 0.5, 7.0, nan]),
            f32s(&[], &[2.0]),
        ],
    );
    same_f32(&as_f32(&r), &[-1.0, 0.5, 2.0, nan]);
}

// ---------------------------------------------------------------------------------------------
// Conversions.

#[test]
fn float_to_int_convert_saturates_and_maps_nan_to_zero() {
    let nan = f32::NAN;
    let inf = f32::INFINITY;
    let x = f32s(&[8], &[nan, inf, -inf, 3e9, -3e9, 2.7, -2.7, -0.0]);
    let t = module("", &["f32[8]"], "r = s32[8] convert(p0)");
    assert_eq!(
        as_s32(&run(&t, std::slice::from_ref(&x))),
        vec![0, i32::MAX, i32::MIN, i32::MAX, i32::MIN, 2, -2, 0]
    );
    let t = module("", &["f32[8]"], "r = u8[8] convert(p0)");
    assert_eq!(
        as_u8(&run(&t, std::slice::from_ref(&x))),
        vec![0, 255, 0, 255, 0, 2, 0, 0]
    );
    let t = module("", &["f32[8]"], "r = pred[8] convert(p0)");
    assert_eq!(
        as_pred(&run(&t, &[x])),
        vec![true, true, true, true, true, true, true, false]
    );
}

#[test]
fn int_conversions_wrap_and_round() {
    let t = module(
        "",
        &["s32[4]"],
        "a = s8[4] convert(p0)\nb = u32[4] convert(p0)\nc = bf16[4] convert(p0)\nd = f32[4] convert(p0)\nr = (s8[4], u32[4], bf16[4], f32[4]) tuple(a, b, c, d)",
    );
    let r = run(&t, &[s32s(&[4], &[300, -1, 257, 16_777_217])]);
    let r = tuple(&r);
    assert_eq!(as_s8(&r[0]), vec![44, -1, 1, 1]);
    assert_eq!(as_u32(&r[1]), vec![300, u32::MAX, 257, 16_777_217]);
    // 257 is a tie between 256 and 258 in bf16: to even (256).
    assert_eq!(as_bf16(&r[2]), vec![300.0, -1.0, 256.0, 16_777_216.0]);
    assert_eq!(as_f32(&r[3]), vec![300.0, -1.0, 257.0, 16_777_216.0]);
}

#[test]
fn float_conversions_round_to_nearest_even() {
    let t = module(
        "",
        &["f32[4]"],
        "a = bf16[4] convert(p0)\nb = f16[4] convert(p0)\nr = (bf16[4], f16[4]) tuple(a, b)",
    );
    let h = 2f32.powi(-8);
    let r = run(
        &t,
        &[f32s(&[4], &[1.0 + h, 1.0 + 3.0 * h, 70000.0, f32::NAN])],
    );
    let r = tuple(&r);
    let bf = as_bf16(&r[0]);
    assert_eq!(&bf[..3], &[1.0, 1.0 + 4.0 * h, 70144.0]);
    assert!(bf[3].is_nan());
    let hf = as_f16(&r[1]);
    assert_eq!(&hf[..3], &[1.0 + h, 1.0 + 3.0 * h, f32::INFINITY]);
    assert!(hf[3].is_nan());
    // f64 -> f32 rounds once.
    let t = module("", &["f64[2]"], "r = f32[2] convert(p0)");
    let r = run(&t, &[f64s(&[2], &[1.0 + 2f64.powi(-24), 0.1])]);
    assert_eq!(as_f32(&r), vec![1.0, 0.1f32]);
}

#[test]
fn bitcast_convert_same_and_different_widths() {
    let t = module("", &["f32[2]"], "r = u32[2] bitcast-convert(p0)");
    assert_eq!(
        as_u32(&run(&t, &[f32s(&[2], &[1.0, -0.0])])),
        vec![0x3f80_0000, 0x8000_0000]
    );
    // Wider to narrower adds a minor dimension holding the little-endian bytes.
    let t = module("", &["f32[2]"], "r = u8[2,4] bitcast-convert(p0)");
    let r = run(&t, &[f32s(&[2], &[1.0, 2.0])]);
    assert_eq!(dims(&r), vec![2, 4]);
    assert_eq!(as_u8(&r), vec![0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]);
    let t = module("", &["u8[2,4]"], "r = s32[2] bitcast-convert(p0)");
    let r = run(&t, &[u8s(&[2, 4], &[1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff])]);
    assert_eq!(as_s32(&r), vec![1, -1]);
}

#[test]
fn reduce_precision_rounds_and_clamps_the_exponent() {
    let h = 2f32.powi(-8);
    let t = module(
        "",
        &["f32[6]"],
        "r = f32[6] reduce-precision(p0), exponent_bits=8, mantissa_bits=7",
    );
    let r = as_f32(&run(
        &t,
        &[f32s(
            &[6],
            &[1.0 + h, 1.0 + 3.0 * h, f32::NAN, f32::INFINITY, 1e-40, -2.5],
        )],
    ));
    // Subnormals keep their exponent and have their bits rounded like any other value:
    // 1e-40 is 0x000116c2, which rounds to 0x00010000.
    same_f32(
        &r,
        &[
            1.0,
            1.0 + 4.0 * h,
            f32::NAN,
            f32::INFINITY,
            f32::from_bits(0x0001_0000),
            -2.5,
        ],
    );
    // Five exponent bits: overflow to inf, underflow (and subnormals) to zero.
    let t = module(
        "",
        &["f32[4]"],
        "r = f32[4] reduce-precision(p0), exponent_bits=5, mantissa_bits=10",
    );
    let r = as_f32(&run(&t, &[f32s(&[4], &[70000.0, -1e-6, 1e-40, 1.0])]));
    same_f32(&r, &[f32::INFINITY, -0.0, 0.0, 1.0]);
}

// ---------------------------------------------------------------------------------------------
// Data movement.

#[test]
fn dynamic_slice_clamps_out_of_range_starts() {
    let t = module(
        "",
        &["f32[5]", "s32[]"],
        "r = f32[2] dynamic-slice(p0, p1), dynamic_slice_sizes={2}",
    );
    let x = f32s(&[5], &[0.0, 1.0, 2.0, 3.0, 4.0]);
    for (start, want) in [(7, [3.0, 4.0]), (-3, [0.0, 1.0]), (2, [2.0, 3.0])] {
        let r = run(&t, &[x.clone(), s32s(&[], &[start])]);
        assert_eq!(as_f32(&r), want.to_vec(), "start {start}");
    }
    let t = module(
        "",
        &["f32[2,3]", "f32[1,2]", "s32[]", "s32[]"],
        "r = f32[2,3] dynamic-update-slice(p0, p1, p2, p3)",
    );
    let r = run(
        &t,
        &[
            f32s(&[2, 3], &[0.0; 6]),
            f32s(&[1, 2], &[8.0, 9.0]),
            s32s(&[], &[5]),
            s32s(&[], &[-4]),
        ],
    );
    assert_eq!(as_f32(&r), vec![0.0, 0.0, 0.0, 8.0, 9.0, 0.0]);
}

#[test]
fn pad_with_negative_and_interior_padding() {
    let t = module(
        "",
        &["f32[4]", "f32[]"],
        "r = f32[7] pad(p0, p1), padding=-1_1_1",
    );
    let r = run(&t, &[f32s(&[4], &[1.0, 2.0, 3.0, 4.0]), f32s(&[], &[0.5])]);
    // Interior: 1 .5 2 .5 3 .5 4, drop one low, add one high.
    assert_eq!(as_f32(&r), vec![0.5, 2.0, 0.5, 3.0, 0.5, 4.0, 0.5]);
    let t = module(
        "",
        &["f32[2,2]", "f32[]"],
        "r = f32[3,4] pad(p0, p1), padding=1_0_0x0_1_1",
    );
    let r = run(
        &t,
        &[f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]), f32s(&[], &[0.0])],
    );
    assert_eq!(
        as_f32(&r),
        vec![0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 2.0, 0.0, 3.0, 0.0, 4.0, 0.0]
    );
}

#[test]
fn broadcast_transpose_slice_reverse_concat_iota() {
    let t = module(
        "",
        &["f32[2,3]"],
        "b = f32[4,2,3] broadcast(p0), dimensions={1,2}\n\
         t = f32[3,2] transpose(p0), dimensions={1,0}\n\
         s = f32[1,2] slice(p0), slice={[1:2], [0:3:2]}\n\
         v = f32[2,3] reverse(p0), dimensions={0,1}\n\
         c = f32[2,6] concatenate(p0, v), dimensions={1}\n\
         i = f32[2,3] iota(), iota_dimension=1\n\
         r = (f32[4,2,3], f32[3,2], f32[1,2], f32[2,3], f32[2,6], f32[2,3]) tuple(b, t, s, v, c, i)",
    );
    let x = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let r = run(&t, &[x]);
    let r = tuple(&r);
    assert_eq!(as_f32(&r[0])[18..], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(as_f32(&r[1]), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(as_f32(&r[2]), vec![4.0, 6.0]);
    assert_eq!(as_f32(&r[3]), vec![6.0, 5.0, 4.0, 3.0, 2.0, 1.0]);
    assert_eq!(
        as_f32(&r[4]),
        vec![1.0, 2.0, 3.0, 6.0, 5.0, 4.0, 4.0, 5.0, 6.0, 3.0, 2.0, 1.0]
    );
    assert_eq!(as_f32(&r[5]), vec![0.0, 1.0, 2.0, 0.0, 1.0, 2.0]);
}

#[test]
fn zero_sized_dimensions() {
    let t = module(
        ADD,
        &["f32[0,3]", "f32[2,3]"],
        "z = f32[] constant(7)\n\
         s = f32[3] reduce(p0, z), dimensions={0}, to_apply=add\n\
         c = f32[2,3] concatenate(p0, p1), dimensions={0}\n\
         d = f32[3,3] dot(p0, p0), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n\
         b = f32[0,3] broadcast(s), dimensions={1}\n\
         r = (f32[3], f32[2,3], f32[3,3], f32[0,3]) tuple(s, c, d, b)",
    );
    let r = run(&t, &[f32s(&[0, 3], &[]), f32s(&[2, 3], &[1.0; 6])]);
    let r = tuple(&r);
    assert_eq!(as_f32(&r[0]), vec![7.0; 3]);
    assert_eq!(as_f32(&r[1]), vec![1.0; 6]);
    assert_eq!(as_f32(&r[2]), vec![0.0; 9]);
    assert_eq!(dims(&r[3]), vec![0, 3]);
}

#[test]
fn scalars_everywhere() {
    let t = module(
        "",
        &["f32[]", "f32[]"],
        "a = f32[] add(p0, p1)\nb = f32[1,1] reshape(a)\nc = f32[] reshape(b)\nr = f32[] multiply(c, c)",
    );
    assert_eq!(
        as_f32(&run(&t, &[f32s(&[], &[1.5]), f32s(&[], &[0.5])])),
        vec![4.0]
    );
}

#[test]
fn bitcast_with_layouts_reinterprets_the_physical_buffer() {
    // p0 is f32[2,3] laid out column-major ({0,1}): physical order 1 4 2 5 3 6 for the logical
    // row-major values 1..6. Bitcast to f32[3,2]{1,0} reads that physical order row-major.
    let t = "HloModule m\n\nENTRY main {\n  p0 = f32[2,3]{1,0} parameter(0)\n  c = f32[2,3]{0,1} copy(p0)\n  ROOT b = f32[3,2]{1,0} bitcast(c)\n}\n";
    let r = run(t, &[f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])]);
    assert_eq!(dims(&r), vec![3, 2]);
    assert_eq!(as_f32(&r), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    // Bitcast between a layout and its matching transpose is the transpose.
    let t = "HloModule m\n\nENTRY main {\n  p0 = f32[2,3]{1,0} parameter(0)\n  ROOT b = f32[3,2]{0,1} bitcast(p0)\n}\n";
    let r = run(t, &[f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])]);
    assert_eq!(as_f32(&r), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    // Scalar bitcast changes the element type.
    let t =
        "HloModule m\n\nENTRY main {\n  p0 = f32[] parameter(0)\n  ROOT b = s32[] bitcast(p0)\n}\n";
    assert_eq!(as_s32(&run(t, &[f32s(&[], &[1.0])])), vec![0x3f80_0000]);
}

// ---------------------------------------------------------------------------------------------
// Reductions, windows, gather and scatter.

const ADD: &str = "add {\n  add.a = f32[] parameter(0)\n  add.b = f32[] parameter(1)\n  ROOT add.s = f32[] add(add.a, add.b)\n}\n";
const MAX: &str = "max {\n  max.a = f32[] parameter(0)\n  max.b = f32[] parameter(1)\n  ROOT max.s = f32[] maximum(max.a, max.b)\n}\n";

#[test]
fn reduce_sum_max_and_variadic_argmax() {
    let argmax = "argmax {\n  am.a = f32[] parameter(0)\n  am.i = s32[] parameter(1)\n  am.b = f32[] parameter(2)\n  am.j = s32[] parameter(3)\n  am.gt = pred[] compare(am.a, am.b), direction=GT\n  am.eq = pred[] compare(am.a, am.b), direction=EQ\n  am.lt = pred[] compare(am.i, am.j), direction=LT\n  am.tie = pred[] and(am.eq, am.lt)\n  am.take = pred[] or(am.gt, am.tie)\n  am.v = f32[] select(am.take, am.a, am.b)\n  am.k = s32[] select(am.take, am.i, am.j)\n  ROOT am.r = (f32[], s32[]) tuple(am.v, am.k)\n}\n";
    let t = module(
        &format!("{ADD}{MAX}{argmax}"),
        &["f32[2,3]"],
        "z = f32[] constant(0)\n\
         m = f32[] constant(-inf)\n\
         zi = s32[] constant(0)\n\
         io = s32[2,3] iota(), iota_dimension=1\n\
         s = f32[2] reduce(p0, z), dimensions={1}, to_apply=add\n\
         x = f32[3] reduce(p0, m), dimensions={0}, to_apply=max\n\
         a = (f32[2], s32[2]) reduce(p0, io, m, zi), dimensions={1}, to_apply=argmax\n\
         av = f32[2] get-tuple-element(a), index=0\n\
         ai = s32[2] get-tuple-element(a), index=1\n\
         r = (f32[2], f32[3], f32[2], s32[2]) tuple(s, x, av, ai)",
    );
    let r = run(&t, &[f32s(&[2, 3], &[1.0, 5.0, 5.0, f32::NAN, -1.0, 2.0])]);
    let r = tuple(&r);
    same_f32(&as_f32(&r[0]), &[11.0, f32::NAN]);
    same_f32(&as_f32(&r[1]), &[f32::NAN, 5.0, 5.0]);
    same_f32(&as_f32(&r[2]), &[5.0, 2.0]);
    // Ties go to the lower index.
    assert_eq!(as_s32(&r[3]), vec![1, 2]);
}

#[test]
fn reduce_window_with_padding_and_dilation() {
    let t = module(
        ADD,
        &["f32[4]"],
        "z = f32[] constant(0)\n\
         a = f32[4] reduce-window(p0, z), window={size=3 pad=1_1}, to_apply=add\n\
         b = f32[2] reduce-window(p0, z), window={size=2 stride=2 rhs_dilate=2 pad=0_1}, to_apply=add\n\
         c = f32[6] reduce-window(p0, z), window={size=2 lhs_dilate=2}, to_apply=add\n\
         r = (f32[4], f32[2], f32[6]) tuple(a, b, c)",
    );
    let r = run(&t, &[f32s(&[4], &[1.0, 2.0, 3.0, 4.0])]);
    let r = tuple(&r);
    assert_eq!(as_f32(&r[0]), vec![3.0, 6.0, 9.0, 7.0]);
    // Windows {0,2} and {2,4(pad)}.
    assert_eq!(as_f32(&r[1]), vec![4.0, 3.0]);
    // Base dilation: 1 _ 2 _ 3 _ 4 (seven places), six windows of two.
    assert_eq!(as_f32(&r[2]), vec![1.0, 2.0, 2.0, 3.0, 3.0, 4.0]);
}

#[test]
fn select_and_scatter_routes_to_the_window_maximum() {
    let ge = "ge {\n  ge.a = f32[] parameter(0)\n  ge.b = f32[] parameter(1)\n  ROOT ge.c = pred[] compare(ge.a, ge.b), direction=GE\n}\n";
    let t = module(
        &format!("{ADD}{ge}"),
        &["f32[4]", "f32[2]"],
        "z = f32[] constant(0)\n\
         r = f32[4] select-and-scatter(p0, p1, z), window={size=2 stride=2}, select=ge, scatter=add",
    );
    let r = run(
        &t,
        &[f32s(&[4], &[1.0, 3.0, 5.0, 5.0]), f32s(&[2], &[10.0, 20.0])],
    );
    // Ties keep the first element.
    assert_eq!(as_f32(&r), vec![0.0, 10.0, 20.0, 0.0]);
}

#[test]
fn gather_clamps_and_handles_batching_dims() {
    let t = module(
        "",
        &["f32[3,2]", "s32[2,1]"],
        "r = f32[2,2] gather(p0, p1), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,2}",
    );
    let x = f32s(&[3, 2], &[0.0, 1.0, 10.0, 11.0, 20.0, 21.0]);
    let r = run(&t, &[x, s32s(&[2, 1], &[5, -2])]);
    assert_eq!(as_f32(&r), vec![20.0, 21.0, 0.0, 1.0]);
    // Batched: row b takes element idx[b] of row b.
    let t = module(
        "",
        &["f32[2,3]", "s32[2,1]"],
        "r = f32[2] gather(p0, p1), offset_dims={}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=1, slice_sizes={1,1}",
    );
    let r = run(
        &t,
        &[
            f32s(&[2, 3], &[0.0, 1.0, 2.0, 10.0, 11.0, 12.0]),
            s32s(&[2, 1], &[2, 0]),
        ],
    );
    assert_eq!(as_f32(&r), vec![2.0, 10.0]);
}

#[test]
fn scatter_accumulates_duplicates_and_skips_out_of_bounds_windows() {
    let t = module(
        ADD,
        &["f32[3,2]", "s32[4,1]", "f32[4,2]"],
        "r = f32[3,2] scatter(p0, p1, p2), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add",
    );
    let r = run(
        &t,
        &[
            f32s(&[3, 2], &[0.0; 6]),
            s32s(&[4, 1], &[1, 1, 3, -1]),
            f32s(&[4, 2], &[1.0, 2.0, 10.0, 20.0, 100.0, 200.0, 7.0, 7.0]),
        ],
    );
    assert_eq!(as_f32(&r), vec![0.0, 0.0, 11.0, 22.0, 0.0, 0.0]);
    // A window that would run past the end is skipped whole, not clipped.
    let t = module(
        ADD,
        &["f32[4]", "s32[1,1]", "f32[1,2]"],
        "r = f32[4] scatter(p0, p1, p2), update_window_dims={1}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add",
    );
    let r = run(
        &t,
        &[
            f32s(&[4], &[0.0; 4]),
            s32s(&[1, 1], &[3]),
            f32s(&[1, 2], &[1.0, 1.0]),
        ],
    );
    assert_eq!(as_f32(&r), vec![0.0; 4]);
}

// ---------------------------------------------------------------------------------------------
// Dot and convolution.

#[test]
fn dot_general_batch_and_integer_dots() {
    let t = module(
        "",
        &["f32[2,2,3]", "f32[2,3,1]"],
        "r = f32[2,2,1] dot(p0, p1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}",
    );
    let a = f32s(
        &[2, 2, 3],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0],
    );
    let b = f32s(&[2, 3, 1], &[1.0, 1.0, 1.0, 7.0, 8.0, 9.0]);
    assert_eq!(as_f32(&run(&t, &[a, b])), vec![6.0, 15.0, 7.0, 8.0]);
    // s8 x s8 -> s32 does not overflow in s8; s32 accumulation wraps.
    let t = module(
        "",
        &["s8[1,2]", "s8[2,1]"],
        "r = s32[1,1] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    );
    let r = run(
        &t,
        &[s8s(&[1, 2], &[-128, 127]), s8s(&[2, 1], &[-128, 127])],
    );
    assert_eq!(as_s32(&r), vec![16384 + 16129]);
    let t = module(
        "",
        &["s32[1,2]", "s32[2,1]"],
        "r = s32[1,1] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    );
    let r = run(
        &t,
        &[
            s32s(&[1, 2], &[65536, 1]),
            s32s(&[2, 1], &[65536, i32::MAX]),
        ],
    );
    assert_eq!(as_s32(&r), vec![i32::MAX]);
    // bf16 inputs with an f32 result accumulate in f32.
    let t = module(
        "",
        &["bf16[1,3]", "bf16[3,1]"],
        "r = f32[1,1] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    );
    let r = run(
        &t,
        &[
            bf16s(&[1, 3], &[256.0, 1.0, 1.0]),
            bf16s(&[3, 1], &[1.0; 3]),
        ],
    );
    assert_eq!(as_f32(&r), vec![258.0]);
}

#[test]
fn convolution_padding_dilation_and_groups() {
    // 1-D, one channel: [1 2 3 4] * [1 10], pad 1 each side.
    let t = module(
        "",
        &["f32[1,4,1]", "f32[2,1,1]"],
        "r = f32[1,5,1] convolution(p0, p1), window={size=2 pad=1_1}, dim_labels=b0f_0io->b0f",
    );
    let x = f32s(&[1, 4, 1], &[1.0, 2.0, 3.0, 4.0]);
    let k = f32s(&[2, 1, 1], &[1.0, 10.0]);
    assert_eq!(
        as_f32(&run(&t, &[x.clone(), k.clone()])),
        vec![10.0, 21.0, 32.0, 43.0, 4.0]
    );
    // lhs dilation 2: 1 0 2 0 3 0 4; rhs dilation 2 with a stride of 2.
    let t = module(
        "",
        &["f32[1,4,1]", "f32[2,1,1]"],
        "r = f32[1,6,1] convolution(p0, p1), window={size=2 lhs_dilate=2}, dim_labels=b0f_0io->b0f",
    );
    assert_eq!(
        as_f32(&run(&t, &[x.clone(), k.clone()])),
        vec![1.0, 20.0, 2.0, 30.0, 3.0, 40.0]
    );
    let t = module(
        "",
        &["f32[1,4,1]", "f32[2,1,1]"],
        "r = f32[1,1,1] convolution(p0, p1), window={size=2 stride=2 rhs_dilate=2}, dim_labels=b0f_0io->b0f",
    );
    assert_eq!(as_f32(&run(&t, &[x, k])), vec![31.0]);
    // Depthwise (feature_group_count=2), channels-first labels.
    let t = module(
        "",
        &["f32[1,2,3]", "f32[2,1,1]"],
        "r = f32[1,2,3] convolution(p0, p1), window={size=1}, dim_labels=bf0_oi0->bf0, feature_group_count=2",
    );
    let r = run(
        &t,
        &[
            f32s(&[1, 2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            f32s(&[2, 1, 1], &[2.0, -1.0]),
        ],
    );
    assert_eq!(as_f32(&r), vec![2.0, 4.0, 6.0, -4.0, -5.0, -6.0]);
    // batch_group_count=2: output feature o reads batch group o.
    let t = module(
        "",
        &["f32[2,2,1]", "f32[1,1,2]"],
        "r = f32[1,2,2] convolution(p0, p1), window={size=1}, dim_labels=b0f_0io->b0f, batch_group_count=2",
    );
    let r = run(
        &t,
        &[
            f32s(&[2, 2, 1], &[1.0, 2.0, 3.0, 4.0]),
            f32s(&[1, 1, 2], &[10.0, 100.0]),
        ],
    );
    assert_eq!(as_f32(&r), vec![10.0, 300.0, 20.0, 400.0]);
}

// ---------------------------------------------------------------------------------------------
// Sort and top-k.

#[test]
fn sort_is_stable_and_multi_operand() {
    let lt = "lt {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  i = s32[] parameter(2)\n  j = s32[] parameter(3)\n  ROOT c = pred[] compare(a, b), direction=LT\n}\n";
    let t = module(
        lt,
        &["s32[6]"],
        "io = s32[6] iota(), iota_dimension=0\n\
         r = (s32[6], s32[6]) sort(p0, io), dimensions={0}, is_stable=true, to_apply=lt",
    );
    let r = run(&t, &[s32s(&[6], &[3, 1, 3, 1, 2, 1])]);
    let r = tuple(&r);
    assert_eq!(as_s32(&r[0]), vec![1, 1, 1, 2, 3, 3]);
    assert_eq!(as_s32(&r[1]), vec![1, 3, 5, 4, 0, 2]);
    // A comparator that is not a plain compare runs per comparison: descending by |x|.
    let gt_abs = "gt {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  x = f32[] abs(a)\n  y = f32[] abs(b)\n  ROOT c = pred[] compare(x, y), direction=GT\n}\n";
    let t = module(
        gt_abs,
        &["f32[2,3]"],
        "r = f32[2,3] sort(p0), dimensions={1}, to_apply=gt",
    );
    let r = run(&t, &[f32s(&[2, 3], &[1.0, -3.0, 2.0, -1.0, 1.0, 0.5])]);
    assert_eq!(as_f32(&r), vec![-3.0, 2.0, 1.0, -1.0, 1.0, 0.5]);
}

#[test]
fn sort_with_nan_in_total_order() {
    let lt = "lt {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=LT, type=TOTALORDER\n}\n";
    let t = module(
        lt,
        &["f32[5]"],
        "r = f32[5] sort(p0), dimensions={0}, to_apply=lt",
    );
    let r = run(
        &t,
        &[f32s(&[5], &[f32::NAN, 0.0, -0.0, f32::NEG_INFINITY, 1.0])],
    );
    same_f32(&as_f32(&r), &[f32::NEG_INFINITY, -0.0, 0.0, 1.0, f32::NAN]);
}

#[test]
fn topk_breaks_ties_by_lower_index() {
    let t = module(
        "",
        &["f32[2,4]"],
        "r = (f32[2,2], s32[2,2]) topk(p0), k=2, largest=true",
    );
    let r = run(
        &t,
        &[f32s(&[2, 4], &[1.0, 5.0, 5.0, 2.0, 0.0, -1.0, 3.0, 3.0])],
    );
    let r = tuple(&r);
    assert_eq!(as_f32(&r[0]), vec![5.0, 5.0, 3.0, 3.0]);
    assert_eq!(as_s32(&r[1]), vec![1, 2, 2, 3]);
}

// ---------------------------------------------------------------------------------------------
// Control flow.

#[test]
fn while_loop_counts() {
    let comps = "cond {\n  c.s = (s32[], f32[]) parameter(0)\n  c.i = s32[] get-tuple-element(c.s), index=0\n  c.n = s32[] constant(5)\n  ROOT c.c = pred[] compare(c.i, c.n), direction=LT\n}\n\
                 body {\n  b.s = (s32[], f32[]) parameter(0)\n  b.i = s32[] get-tuple-element(b.s), index=0\n  b.x = f32[] get-tuple-element(b.s), index=1\n  b.one = s32[] constant(1)\n  b.j = s32[] add(b.i, b.one)\n  b.y = f32[] add(b.x, b.x)\n  ROOT b.t = (s32[], f32[]) tuple(b.j, b.y)\n}\n";
    let t = module(
        comps,
        &["f32[]"],
        "z = s32[] constant(0)\ns = (s32[], f32[]) tuple(z, p0)\nr = (s32[], f32[]) while(s), condition=cond, body=body",
    );
    let r = run(&t, &[f32s(&[], &[1.5])]);
    assert_eq!(as_s32(&tuple(&r)[0]), vec![5]);
    assert_eq!(as_f32(&tuple(&r)[1]), vec![48.0]);
}

#[test]
fn conditional_index_out_of_range_runs_the_last_branch() {
    let comps = "b0 {\n  x0 = f32[] parameter(0)\n  ROOT y0 = f32[] negate(x0)\n}\n\
                 b1 {\n  x1 = f32[] parameter(0)\n  ROOT y1 = f32[] add(x1, x1)\n}\n\
                 b2 {\n  x2 = f32[] parameter(0)\n  ROOT y2 = f32[] multiply(x2, x2)\n}\n";
    let t = module(
        comps,
        &["s32[]", "f32[]"],
        "r = f32[] conditional(p0, p1, p1, p1), branch_computations={b0, b1, b2}",
    );
    for (i, want) in [(0, -3.0), (1, 6.0), (2, 9.0), (7, 9.0), (-1, 9.0)] {
        let r = run(&t, &[s32s(&[], &[i]), f32s(&[], &[3.0])]);
        assert_eq!(as_f32(&r), vec![want], "index {i}");
    }
}

#[test]
fn call_map_and_fusion() {
    let comps = "sq {\n  sq.x = f32[] parameter(0)\n  ROOT sq.y = f32[] multiply(sq.x, sq.x)\n}\n\
                 fused {\n  f.a = f32[3] parameter(0)\n  f.b = f32[3] parameter(1)\n  ROOT f.c = f32[3] subtract(f.a, f.b)\n}\n\
                 twice {\n  t.a = f32[3] parameter(0)\n  ROOT t.c = f32[3] add(t.a, t.a)\n}\n";
    let t = module(
        comps,
        &["f32[3]"],
        "m = f32[3] map(p0), dimensions={0}, to_apply=sq\n\
         f = f32[3] fusion(m, p0), kind=kLoop, calls=fused\n\
         r = f32[3] call(f), to_apply=twice",
    );
    let r = run(&t, &[f32s(&[3], &[1.0, 2.0, 3.0])]);
    assert_eq!(as_f32(&r), vec![0.0, 4.0, 12.0]);
}

// ---------------------------------------------------------------------------------------------
// Linear algebra and FFT.

#[test]
fn cholesky_and_triangular_solve() {
    let t = module("", &["f64[2,2]"], "r = f64[2,2] cholesky(p0), lower=true");
    let r = as_f64(&run(&t, &[f64s(&[2, 2], &[4.0, 99.0, 2.0, 5.0])]));
    // The upper input triangle is ignored; the upper result triangle is zero.
    assert_eq!(r, vec![2.0, 0.0, 1.0, 2.0]);
    let t = module(
        "",
        &["f64[2,2]", "f64[2,1]"],
        "r = f64[2,1] triangular-solve(p0, p1), left_side=true, lower=true, transpose_a=NO_TRANSPOSE",
    );
    let r = as_f64(&run(
        &t,
        &[
            f64s(&[2, 2], &[2.0, 0.0, 1.0, 2.0]),
            f64s(&[2, 1], &[4.0, 6.0]),
        ],
    ));
    assert_eq!(r, vec![2.0, 2.0]);
    // x A^T = b with A lower: A^T is upper.
    let t = module(
        "",
        &["f64[2,2]", "f64[1,2]"],
        "r = f64[1,2] triangular-solve(p0, p1), left_side=false, lower=true, transpose_a=TRANSPOSE",
    );
    let r = as_f64(&run(
        &t,
        &[
            f64s(&[2, 2], &[2.0, 0.0, 1.0, 2.0]),
            f64s(&[1, 2], &[4.0, 6.0]),
        ],
    ));
    // [x0 x1] [[2 1] [0 2]] = [4 6]: x0 = 2, x1 = (6 - 2) / 2 = 2.
    assert_eq!(r, vec![2.0, 2.0]);
}

#[test]
fn fft_round_trips() {
    let t = module(
        "",
        &["f32[6]"],
        "c = c64[4] fft(p0), fft_type=RFFT, fft_length={6}\n\
         r = f32[6] fft(c), fft_type=IRFFT, fft_length={6}",
    );
    let x = [1.0, 2.0, -1.0, 0.5, 3.0, -2.0];
    let r = as_f32(&run_close(&t, &[f32s(&[6], &x)]));
    for (g, w) in r.iter().zip(x) {
        assert!((g - w).abs() < 1e-5, "{r:?}");
    }
    // RFFT of a constant is a spike at frequency 0.
    let t = module(
        "",
        &["f32[4]"],
        "r = c64[3] fft(p0), fft_type=RFFT, fft_length={4}",
    );
    let r = run_close(&t, &[f32s(&[4], &[1.0; 4])]);
    let want = [(4.0, 0.0), (0.0, 0.0), (0.0, 0.0)];
    for (g, w) in as_f32_pairs(&r).iter().zip(want) {
        assert!(
            (g.0 - w.0).abs() < 1e-6 && (g.1 - w.1).abs() < 1e-6,
            "{g:?} vs {w:?}"
        );
    }
}

/// XLA does not tie an FFT's lengths to its operand's dimensions where one of them is zero
/// (XLA's evaluator tests): a zero fft_length on a non-empty operand gives zeros, a zero-sized
/// operand an empty result, on the evaluator and the cpu backend alike.
#[test]
fn fft_with_a_zero_length_or_an_empty_operand() {
    let c64s = |dims: &[i64], v: &[(f32, f32)]| {
        lit(ElementType::C64, dims, v, |(re, im)| {
            [re.to_le_bytes(), im.to_le_bytes()].concat()
        })
    };
    let t = module(
        "",
        &["c64[2,3]"],
        "r = c64[2,3] fft(p0), fft_type=FFT, fft_length={0}",
    );
    let x: Vec<(f32, f32)> = (0..6).map(|k| (k as f32 + 1.0, -0.5)).collect();
    let r = run(&t, &[c64s(&[2, 3], &x)]);
    assert_eq!(as_f32_pairs(&r), vec![(0.0, 0.0); 6]);
    let t = module(
        "",
        &["c64[2,0]"],
        "r = c64[2,0] fft(p0), fft_type=IFFT, fft_length={3}",
    );
    let r = run(&t, &[c64s(&[2, 0], &[])]);
    assert!(as_f32_pairs(&r).is_empty());
    // A non-zero length that differs from the dimension stays an error.
    let bad = module(
        "",
        &["c64[3]"],
        "r = c64[3] fft(p0), fft_type=FFT, fft_length={4}",
    );
    let m = parse(&bad);
    let e = axle::ir::verify(&m).expect_err("fft_length 4 of a c64[3]");
    assert!(e.to_string().contains("fft_length"), "{e}");
}

/// A gather from an empty operand whose result is not empty reads nothing: its elements are
/// zeros, as XLA gives (the evaluator panicked and the cpu backend read out of bounds).
#[test]
fn gather_from_an_empty_operand_gives_zeros() {
    let t = module(
        "",
        &["f32[0,2]", "s32[3,1]"],
        "g = f32[3,2] gather(p0, p1), offset_dims={1}, collapsed_slice_dims={0}, \
         start_index_map={0}, index_vector_dim=1, slice_sizes={0,2}",
    );
    let r = run(&t, &[f32s(&[0, 2], &[]), s32s(&[3, 1], &[0, 1, -2])]);
    assert_eq!(as_f32(&r), vec![0.0; 6]);
}

fn as_f32_pairs(l: &Literal) -> Vec<(f32, f32)> {
    get(l, 8, |b| {
        (
            f32::from_le_bytes(b[..4].try_into().unwrap()),
            f32::from_le_bytes(b[4..].try_into().unwrap()),
        )
    })
}

// ---------------------------------------------------------------------------------------------
// Random bits.

#[test]
fn rng_bit_generator_threefry_and_philox_shapes_and_state() {
    let t = module(
        "",
        &["u64[2]"],
        "r = (u64[2], u32[2,3]) rng-bit-generator(p0), algorithm=rng_three_fry",
    );
    let state = lit(ElementType::U64, &[2], &[5u64, 100], |x: u64| {
        x.to_le_bytes().to_vec()
    });
    let r = run(&t, std::slice::from_ref(&state));
    let r = tuple(&r);
    // Six 32-bit values come from three counter values (the shape split in halves).
    assert_eq!(as_u64(&r[0]), vec![5, 103]);
    let t = module(
        "",
        &["u64[2]"],
        "r = (u64[2], u64[5]) rng-bit-generator(p0), algorithm=rng_philox",
    );
    let r = run(&t, &[state]);
    // Five 64-bit values take ten 32-bit words, three Philox blocks.
    assert_eq!(as_u64(&tuple(&r)[0]), vec![5, 103]);
}

// ---------------------------------------------------------------------------------------------
// Errors.

#[test]
fn unsupported_ops_are_errors_naming_the_instruction() {
    let t = module(
        "",
        &["f32[2]"],
        "r = f32[2] rng(p0, p0), distribution=rng_uniform",
    );
    let e = run_err(&t, &[f32s(&[2], &[0.0, 1.0])]);
    assert_eq!(e.instruction, "r");
    assert_eq!(e.opcode, "rng");
    assert!(e.to_string().contains("%r (rng)"), "{e}");
    let t = module(
        "",
        &["f32[2]"],
        "r = f32[2] custom-call(p0), custom_call_target=\"my_kernel\"",
    );
    let e = run_err(&t, &[f32s(&[2], &[0.0, 1.0])]);
    assert!(e.message.contains("my_kernel"), "{e}");
}

#[test]
fn argument_shape_mismatch_is_an_error() {
    let t = module("", &["f32[2]"], "r = f32[2] negate(p0)");
    let e = run_err(&t, &[f32s(&[3], &[0.0, 1.0, 2.0])]);
    assert_eq!(e.instruction, "p0");
    assert!(e.message.contains("f32[3]"), "{e}");
}

#[test]
fn errors_inside_nested_computations_name_the_inner_instruction() {
    let comps = "inner {\n  x = f32[2] parameter(0)\n  ROOT bad = f32[2] rng(x, x), distribution=rng_uniform\n}\n";
    let t = module(comps, &["f32[2]"], "r = f32[2] call(p0), to_apply=inner");
    let e = run_err(&t, &[f32s(&[2], &[0.0, 1.0])]);
    assert_eq!(e.instruction, "bad");
    assert_eq!(e.computation, "inner");
}

// ---------------------------------------------------------------------------------------------
// Determinism.

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let t = module(
        ADD,
        &["f32[1200000]", "f32[96,80]", "f32[80,64]"],
        "e = f32[1200000] exponential(p0)\n\
         m = f32[1200000] multiply(e, p0)\n\
         z = f32[] constant(0)\n\
         s = f32[] reduce(m, z), dimensions={0}, to_apply=add\n\
         d = f32[96,64] dot(p1, p2), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n\
         r = (f32[1200000], f32[], f32[96,64]) tuple(m, s, d)",
    );
    let m = parse(&t);
    let mut x = 0x2545_f491u32;
    let mut gen = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x % 2000) as f32 / 1000.0 - 1.0
            })
            .collect()
    };
    let args = [
        f32s(&[1_200_000], &gen(1_200_000)),
        f32s(&[96, 80], &gen(96 * 80)),
        f32s(&[80, 64], &gen(80 * 64)),
    ];
    let on = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| evaluate(&m, &args).unwrap())
    };
    assert_eq!(on(1), on(8));
}

#[test]
fn malformed_shapes_are_errors_not_wrong_answers() {
    // The declared result has more elements than the operand.
    let t = module("", &["f32[2]"], "r = f32[3] negate(p0)");
    let e = run_err(&t, &[f32s(&[2], &[1.0, 2.0])]);
    assert_eq!(e.instruction, "r");
    // Slice bounds past the end.
    let t = module("", &["f32[4]"], "r = f32[3] slice(p0), slice={[2:5]}");
    let e = run_err(&t, &[f32s(&[4], &[0.0; 4])]);
    assert!(e.message.contains("slice bounds"), "{e}");
    // A declared shape that disagrees with what the op computes.
    let t = module(
        "",
        &["f32[2,3]"],
        "r = f32[2,3] transpose(p0), dimensions={1,0}",
    );
    let e = run_err(&t, &[f32s(&[2, 3], &[0.0; 6])]);
    assert!(e.message.contains("declared shape"), "{e}");
}

#[test]
fn calls_fusions_and_conditionals_inside_applied_computations() {
    // A reducer that calls a computation, a map whose body is a fusion, a sort-free
    // conditional on a pred and on an s32 index (out of range: the last branch).
    let comps = "inner {\n  inner.a = f32[] parameter(0)\n  inner.b = f32[] parameter(1)\n  ROOT inner.s = f32[] add(inner.a, inner.b)\n}\n\n\
         red {\n  red.x = f32[] parameter(0)\n  red.y = f32[] parameter(1)\n  ROOT red.c = f32[] call(red.x, red.y), to_apply=inner\n}\n\n\
         fused {\n  fused.p = f32[] parameter(0)\n  fused.q = f32[] multiply(fused.p, fused.p)\n  ROOT fused.r = f32[] negate(fused.q)\n}\n\n\
         body {\n  body.x = f32[] parameter(0)\n  ROOT body.f = f32[] fusion(body.x), kind=kLoop, calls=fused\n}\n\n\
         neg {\n  neg.x = f32[] parameter(0)\n  ROOT neg.r = f32[] negate(neg.x)\n}\n\n\
         dbl {\n  dbl.x = f32[] parameter(0)\n  ROOT dbl.r = f32[] add(dbl.x, dbl.x)\n}\n\n\
         sq {\n  sq.x = f32[] parameter(0)\n  ROOT sq.r = f32[] multiply(sq.x, sq.x)\n}\n\n\
         pick {\n  pick.x = f32[] parameter(0)\n  pick.z = f32[] constant(0)\n  pick.p = pred[] compare(pick.x, pick.z), direction=LT\n  ROOT pick.c = f32[] conditional(pick.p, pick.x, pick.x), true_computation=neg, false_computation=dbl\n}\n\n\
         pick3 {\n  pick3.x = f32[] parameter(0)\n  pick3.i = s32[] convert(pick3.x)\n  ROOT pick3.c = f32[] conditional(pick3.i, pick3.x, pick3.x, pick3.x), branch_computations={neg, dbl, sq}\n}\n";
    let t = module(
        comps,
        &["f32[2,3]", "f32[5]"],
        "z = f32[] constant(0)\n\
         s = f32[2] reduce(p0, z), dimensions={1}, to_apply=red\n\
         m = f32[5] map(p1), dimensions={0}, to_apply=body\n\
         c = f32[5] map(p1), dimensions={0}, to_apply=pick\n\
         k = f32[5] map(p1), dimensions={0}, to_apply=pick3\n\
         r = (f32[2], f32[5], f32[5], f32[5]) tuple(s, m, c, k)",
    );
    let x = [-1.0, 0.0, 1.0, 2.0, 7.0];
    let r = run(
        &t,
        &[
            f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            f32s(&[5], &x),
        ],
    );
    let r = tuple(&r);
    assert_eq!(as_f32(&r[0]), vec![6.0, 15.0]);
    assert_eq!(as_f32(&r[1]), vec![-1.0, -0.0, -1.0, -4.0, -49.0]);
    assert_eq!(as_f32(&r[2]), vec![1.0, 0.0, 2.0, 4.0, 14.0]);
    // Index -1 and 7 are out of range: the last branch (square).
    assert_eq!(as_f32(&r[3]), vec![1.0, -0.0, 2.0, 4.0, 49.0]);
}

#[test]
fn while_loops_inside_applied_computations() {
    // A map whose body counts Collatz steps with a data-dependent while loop over a
    // (value, steps) tuple state.
    let comps = "cond {\n  cond.s = (s32[], s32[]) parameter(0)\n  cond.x = s32[] get-tuple-element(cond.s), index=0\n  cond.one = s32[] constant(1)\n  ROOT cond.c = pred[] compare(cond.x, cond.one), direction=GT\n}\n\n\
         step {\n  step.s = (s32[], s32[]) parameter(0)\n  step.x = s32[] get-tuple-element(step.s), index=0\n  step.n = s32[] get-tuple-element(step.s), index=1\n  step.one = s32[] constant(1)\n  step.two = s32[] constant(2)\n  step.three = s32[] constant(3)\n  step.r = s32[] remainder(step.x, step.two)\n  step.z = s32[] constant(0)\n  step.even = pred[] compare(step.r, step.z), direction=EQ\n  step.h = s32[] divide(step.x, step.two)\n  step.t = s32[] multiply(step.x, step.three)\n  step.t1 = s32[] add(step.t, step.one)\n  step.nx = s32[] select(step.even, step.h, step.t1)\n  step.nn = s32[] add(step.n, step.one)\n  ROOT step.out = (s32[], s32[]) tuple(step.nx, step.nn)\n}\n\n\
         steps {\n  steps.x = s32[] parameter(0)\n  steps.z = s32[] constant(0)\n  steps.init = (s32[], s32[]) tuple(steps.x, steps.z)\n  steps.w = (s32[], s32[]) while(steps.init), condition=cond, body=step\n  ROOT steps.n = s32[] get-tuple-element(steps.w), index=1\n}\n";
    let t = module(
        comps,
        &["s32[6]"],
        "r = s32[6] map(p0), dimensions={0}, to_apply=steps",
    );
    let r = run(&t, &[s32s(&[6], &[1, 2, 3, 6, 7, 27])]);
    assert_eq!(as_s32(&r), vec![0, 1, 7, 8, 16, 111]);
}
