//! Complex element types (`c64`, `c128`) on the CPU backend against the reference evaluator:
//! every op on edge-case operands (signed zeros, infinities, NaN, huge and tiny magnitudes),
//! data movement, reductions, complex dots and convolutions of a few shapes, and clear errors
//! for what is not defined on complex numbers.

use axle_analysis::{evaluate_with, EvalOptions};
use axle_codegen_cpu::{compile, CpuOptions};
use axle_ir::literal::complex_to_element;
use axle_ir::{
    compare_arrays, parse_module, ArrayLiteral, ArrayShape, ElementType, Literal, Tolerance,
};

/// The leaves of a result literal.
fn leaves(l: Literal) -> Vec<ArrayLiteral> {
    match l {
        Literal::Array(a) => vec![a],
        Literal::Tuple(t) => t.into_iter().flat_map(leaves).collect(),
    }
}

/// A complex array literal of type `ty` from `(re, im)` pairs.
fn complex(ty: ElementType, dims: &[i64], v: &[(f64, f64)]) -> Literal {
    let mut a = ArrayLiteral::zeros(ArrayShape::new(ty, dims));
    assert_eq!(a.len(), v.len(), "literal size");
    a.data = v
        .iter()
        .flat_map(|&(re, im)| complex_to_element(ty, re, im))
        .collect();
    Literal::Array(a)
}

/// Deterministic pseudo-random values in [-2, 2).
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
        })
        .collect()
}

fn pairs(n: usize, seed: u64) -> Vec<(f64, f64)> {
    let v = values(2 * n, seed);
    v.chunks(2).map(|c| (c[0], c[1])).collect()
}

/// Runs `text` on the evaluator and the CPU backend (both with or without subnormal flushing)
/// and compares every output leaf under `tol`.
fn check(text: &str, args: &[Literal], cpu: CpuOptions, tol: Tolerance) {
    let m = parse_module(text).unwrap_or_else(|e| panic!("parse: {e}\n{text}"));
    let eopts = EvalOptions {
        flush_denormals: cpu.flush_denormals,
    };
    let want = leaves(evaluate_with(&m, args, &eopts).expect("the evaluator runs it"));
    let exe = compile(&m, &cpu).unwrap_or_else(|e| panic!("compile: {e}\n{text}"));
    let got = exe.run_literals(args).expect("runs");
    assert_eq!(want.len(), got.len(), "number of outputs");
    for (k, (w, g)) in want.iter().zip(&got).enumerate() {
        if let Err(e) = compare_arrays(w, g, tol) {
            panic!("output {k}: {e}\n{text}");
        }
    }
}

/// IEEE arithmetic (no flushing), so both sides compute the same formulas bit for bit.
fn ieee() -> CpuOptions {
    CpuOptions {
        flush_denormals: false,
        ..Default::default()
    }
}

/// IEEE arithmetic with the C library's transcendentals, as the evaluator calls them.
fn ieee_libm() -> CpuOptions {
    CpuOptions {
        flush_denormals: false,
        libm_math: true,
        ..Default::default()
    }
}

/// Component values covering signed zeros, infinities, NaN, huge and tiny magnitudes.
fn specials(ty: ElementType) -> Vec<f64> {
    let big = if ty == ElementType::C64 {
        3.0e38
    } else {
        1.5e308
    };
    vec![
        0.0,
        -0.0,
        1.0,
        -1.5,
        2.5e-3,
        1e20,
        big,
        -big,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ]
}

/// Every `(re, im)` pair of special components.
fn special_pairs(ty: ElementType) -> Vec<(f64, f64)> {
    let s = specials(ty);
    s.iter()
        .flat_map(|&re| s.iter().map(move |&im| (re, im)))
        .collect()
}

/// Complex values as `(re, im)` pairs.
type Pairs = Vec<(f64, f64)>;

/// Binary operands: every special value against every other.
fn special_cross(ty: ElementType) -> (Pairs, Pairs) {
    let p = special_pairs(ty);
    let x = p
        .iter()
        .flat_map(|&a| std::iter::repeat_n(a, p.len()))
        .collect();
    let y = p.iter().cycle().take(p.len() * p.len()).copied().collect();
    (x, y)
}

#[test]
fn arithmetic_edge_cases_are_exact() {
    for (ty, rty) in [(ElementType::C64, "f32"), (ElementType::C128, "f64")] {
        let t = ty.name();
        let (x, y) = special_cross(ty);
        let n = x.len();
        let text = format!(
            "HloModule m\nENTRY main {{\n  x = {t}[{n}] parameter(0)\n  y = {t}[{n}] parameter(1)\n  \
             a = {t}[{n}] add(x, y)\n  s = {t}[{n}] subtract(x, y)\n  m = {t}[{n}] multiply(x, y)\n  \
             d = {t}[{n}] divide(x, y)\n  g = {t}[{n}] negate(x)\n  r = {rty}[{n}] real(x)\n  \
             i = {rty}[{n}] imag(y)\n  c = {t}[{n}] complex(r, i)\n  \
             eq = pred[{n}] compare(x, y), direction=EQ\n  ne = pred[{n}] compare(x, y), direction=NE\n  \
             sel = {t}[{n}] select(eq, x, y)\n  \
             ROOT o = ({t}[{n}], {t}[{n}], {t}[{n}], {t}[{n}], {t}[{n}], {rty}[{n}], {rty}[{n}], {t}[{n}], pred[{n}], pred[{n}], {t}[{n}]) \
             tuple(a, s, m, d, g, r, i, c, eq, ne, sel)\n}}\n"
        );
        let args = [complex(ty, &[n as i64], &x), complex(ty, &[n as i64], &y)];
        check(&text, &args, ieee(), Tolerance::Exact);
    }
}

#[test]
fn abs_sqrt_sign_edge_cases() {
    for (ty, rty, rtol) in [
        (ElementType::C64, "f32", 1e-6),
        (ElementType::C128, "f64", 1e-14),
    ] {
        let t = ty.name();
        let x = special_pairs(ty);
        let n = x.len();
        let text = format!(
            "HloModule m\nENTRY main {{\n  x = {t}[{n}] parameter(0)\n  a = {rty}[{n}] abs(x)\n  \
             q = {t}[{n}] sqrt(x)\n  r = {t}[{n}] rsqrt(x)\n  s = {t}[{n}] sign(x)\n  \
             ROOT o = ({rty}[{n}], {t}[{n}], {t}[{n}], {t}[{n}]) tuple(a, q, r, s)\n}}\n"
        );
        let args = [complex(ty, &[n as i64], &x)];
        check(&text, &args, ieee(), Tolerance::Close { rtol, atol: 0.0 });
    }
}

#[test]
fn abs_does_not_overflow_or_underflow() {
    // |z| of parts near the largest and smallest normal values, where squaring would leave
    // the type's range.
    let c64 = [(2.0e38, 2.0e38), (-2.0e38, 1.0e38), (1.5e-38, 2.0e-38)];
    let c128 = [
        (1.0e308, 1.0e308),
        (-1.5e308, 1.0e300),
        (3.0e-308, -4.0e-308),
    ];
    for (ty, rty, v, want) in [
        (
            ElementType::C64,
            "f32",
            &c64[..],
            [2.828427e38, 2.236068e38, 2.5e-38],
        ),
        (
            ElementType::C128,
            "f64",
            &c128[..],
            [1.4142135623730951e308, 1.5e308, 5.0e-308],
        ),
    ] {
        let t = ty.name();
        let text = format!(
            "HloModule m\nENTRY main {{\n  x = {t}[3] parameter(0)\n  ROOT a = {rty}[3] abs(x)\n}}\n"
        );
        let args = [complex(ty, &[3], v)];
        check(
            &text,
            &args,
            ieee(),
            Tolerance::Close {
                rtol: 1e-6,
                atol: 0.0,
            },
        );
        let m = parse_module(&text).unwrap();
        let got = compile(&m, &ieee()).unwrap().run_literals(&args).unwrap();
        let got: Vec<f64> = (0..3).map(|k| got[0].get_f64(k)).collect();
        for (g, w) in got.iter().zip(want) {
            assert!(((g - w) / w).abs() < 1e-6, "abs {g} vs {w}");
        }
    }
}

/// `ROOT d = divide(x, y)` of two `t[6]` parameters.
fn divide6(t: &str) -> String {
    format!(
        "HloModule m\nENTRY main {{\n  x = {t}[6] parameter(0)\n  y = {t}[6] parameter(1)\n  \
         ROOT d = {t}[6] divide(x, y)\n}}\n"
    )
}

#[test]
fn division_by_huge_and_zero() {
    for ty in [ElementType::C64, ElementType::C128] {
        let t = ty.name();
        let big = if ty == ElementType::C64 {
            3.0e38
        } else {
            1.5e308
        };
        let huge = if ty == ElementType::C64 {
            1.0e38
        } else {
            1.0e307
        };
        let x = [
            (huge, huge),
            (big, big),
            (1.0, 0.0),
            (0.0, 0.0),
            (-1.0, 2.0),
            (big, -big),
        ];
        let y = [
            (huge, huge),
            (big, big),
            (0.0, 0.0),
            (0.0, 0.0),
            (-0.0, 0.0),
            (0.5, big),
        ];
        let text = divide6(t);
        let args = [complex(ty, &[6], &x), complex(ty, &[6], &y)];
        check(&text, &args, ieee(), Tolerance::Exact);
        // Smith's algorithm keeps (h + h i) / (h + h i) finite where |y|^2 overflows.
        let m = parse_module(&text).unwrap();
        let got = compile(&m, &ieee()).unwrap().run_literals(&args).unwrap();
        assert_eq!(got[0].get_f64(0), 1.0, "{t}: (h + h i) / (h + h i)");
    }
}

#[test]
fn transcendental_edge_cases() {
    for (ty, rtol, atol) in [
        (ElementType::C64, 1e-5, 1e-6),
        (ElementType::C128, 1e-12, 1e-13),
    ] {
        let t = ty.name();
        let x = special_pairs(ty);
        let n = x.len();
        let text = format!(
            "HloModule m\nENTRY main {{\n  x = {t}[{n}] parameter(0)\n  e = {t}[{n}] exponential(x)\n  \
             em = {t}[{n}] exponential-minus-one(x)\n  l = {t}[{n}] log(x)\n  \
             lp = {t}[{n}] log-plus-one(x)\n  th = {t}[{n}] tanh(x)\n  s = {t}[{n}] sine(x)\n  \
             c = {t}[{n}] cosine(x)\n  tn = {t}[{n}] tan(x)\n  \
             ROOT o = ({t}[{n}], {t}[{n}], {t}[{n}], {t}[{n}], {t}[{n}], {t}[{n}], {t}[{n}], \
             {t}[{n}]) tuple(e, em, l, lp, th, s, c, tn)\n}}\n"
        );
        let args = [complex(ty, &[n as i64], &x)];
        check(&text, &args, ieee_libm(), Tolerance::Close { rtol, atol });
    }
}

#[test]
fn power_edge_cases() {
    for (ty, rtol, atol) in [
        (ElementType::C64, 1e-5, 1e-6),
        (ElementType::C128, 1e-12, 1e-13),
    ] {
        let t = ty.name();
        // Small values, so results stay in range; zeros, ones, infinities and NaN.
        let s = [0.0, -0.0, 1.0, -0.5, 2.0, f64::INFINITY, f64::NAN];
        let p: Vec<(f64, f64)> = s
            .iter()
            .flat_map(|&re| s.iter().map(move |&im| (re, im)))
            .collect();
        let x: Vec<(f64, f64)> = p
            .iter()
            .flat_map(|&a| std::iter::repeat_n(a, p.len()))
            .collect();
        let y: Vec<(f64, f64)> = p.iter().cycle().take(p.len() * p.len()).copied().collect();
        let n = x.len();
        let text = format!(
            "HloModule m\nENTRY main {{\n  x = {t}[{n}] parameter(0)\n  y = {t}[{n}] parameter(1)\n  \
             ROOT p = {t}[{n}] power(x, y)\n}}\n"
        );
        let args = [complex(ty, &[n as i64], &x), complex(ty, &[n as i64], &y)];
        check(&text, &args, ieee_libm(), Tolerance::Close { rtol, atol });
    }
}

#[test]
fn default_options_match_on_ordinary_values() {
    // The inline f32 exp/log approximations and subnormal flushing: a few ulps.
    let x = pairs(64, 1);
    let y = pairs(64, 2);
    let text = "HloModule m\nENTRY main {\n  x = c64[64] parameter(0)\n  y = c64[64] parameter(1)\n  \
         e = c64[64] exponential(x)\n  l = c64[64] log(x)\n  p = c64[64] power(x, y)\n  \
         t = c64[64] tanh(x)\n  d = c64[64] divide(x, y)\n  a = f32[64] abs(x)\n  \
         ROOT o = (c64[64], c64[64], c64[64], c64[64], c64[64], f32[64]) tuple(e, l, p, t, d, a)\n}\n";
    let args = [
        complex(ElementType::C64, &[64], &x),
        complex(ElementType::C64, &[64], &y),
    ];
    check(
        text,
        &args,
        CpuOptions::default(),
        Tolerance::Close {
            rtol: 1e-4,
            atol: 1e-5,
        },
    );
}

/// Subnormal and tiny components under the default FTZ options, as XLA's CPU backend runs:
/// arithmetic reads and writes flushed parts, `sign` of an operand that flushes to zero is that
/// operand, compares read flushed parts, `real`/`imag`/`negate` are exact, converts flush like
/// the real ones, and `expm1`/`sin`/`tanh` keep tiny arguments.
#[test]
fn subnormal_parts_flush_as_xla() {
    for (ty, ft, wide, sub, tiny) in [
        ("c64", "f32", "c128", 1e-39, 1e-20),
        ("c128", "f64", "c64", 1e-309, 1e-160),
    ] {
        let et = if ty == "c64" {
            ElementType::C64
        } else {
            ElementType::C128
        };
        let x = [
            (sub, 3.0 * sub),
            (-sub, 0.0),
            (0.0, sub),
            (tiny, tiny),
            (tiny, -sub),
            (1.5, sub),
            (-sub, 2.0),
            (0.5, -0.25),
        ];
        let y = [
            (sub, 3.0 * sub),
            (0.0, 0.0),
            (sub, 1.0),
            (tiny, tiny),
            (1.0, 1.0),
            (2.0, -sub),
            (sub, -2.0),
            (0.5, -0.25),
        ];
        let ops: Vec<String> = [
            "add(x, y)",
            "subtract(x, y)",
            "multiply(x, y)",
            "divide(x, y)",
            "sign(x)",
            "sqrt(x)",
            "rsqrt(x)",
            "exponential(x)",
            "exponential-minus-one(x)",
            "sine(x)",
            "cosine(x)",
            "tanh(x)",
            "negate(x)",
        ]
        .iter()
        .map(|o| format!("{ty}[8] {o}"))
        .chain([
            format!("{ft}[8] abs(x)"),
            format!("{ft}[8] real(x)"),
            format!("{ft}[8] imag(x)"),
            "pred[8] compare(x, y), direction=EQ".into(),
            "pred[8] compare(x, y), direction=NE".into(),
            format!("{wide}[8] convert(x)"),
        ])
        .collect();
        let body: String = ops
            .iter()
            .enumerate()
            .map(|(k, o)| format!("  r{k} = {o}\n"))
            .collect();
        let shapes: Vec<&str> = ops.iter().map(|o| o.split(' ').next().unwrap()).collect();
        let names: Vec<String> = (0..ops.len()).map(|k| format!("r{k}")).collect();
        let text = format!(
            "HloModule m\nENTRY main {{\n  x = {ty}[8] parameter(0)\n  y = {ty}[8] parameter(1)\n\
             {body}  ROOT o = ({}) tuple({})\n}}\n",
            shapes.join(", "),
            names.join(", ")
        );
        let args = [complex(et, &[8], &x), complex(et, &[8], &y)];
        check(
            &text,
            &args,
            CpuOptions::default(),
            Tolerance::Close {
                rtol: 1e-5,
                atol: 0.0,
            },
        );
    }
}

#[test]
fn converts() {
    let text = "HloModule m\nENTRY main {\n  x = c64[5] parameter(0)\n  f = f32[5] parameter(1)\n  \
         i = s32[5] parameter(2)\n  w = c128[5] convert(x)\n  b = c64[5] convert(w)\n  \
         cf = c64[5] convert(f)\n  cd = c128[5] convert(f)\n  ci = c64[5] convert(i)\n  \
         p = pred[5] compare(i, i), direction=GT\n  cp = c128[5] convert(p)\n  \
         io = c64[5] iota(), iota_dimension=0\n  \
         ROOT o = (c128[5], c64[5], c64[5], c128[5], c64[5], c128[5], c64[5]) tuple(w, b, cf, cd, ci, cp, io)\n}\n";
    let x = [
        (1.5, -2.0),
        (-0.0, f64::NAN),
        (f64::INFINITY, 3.0e38),
        (1e-20, -1e20),
        (0.0, -0.0),
    ];
    let f = [1.5f32, -0.0, f32::NAN, f32::NEG_INFINITY, 7.0];
    let i = [0i32, -3, i32::MAX, i32::MIN, 12345679];
    let args = [
        complex(ElementType::C64, &[5], &x),
        Literal::Array(ArrayLiteral::from_slice(&[5], &f)),
        Literal::Array(ArrayLiteral::from_slice(&[5], &i)),
    ];
    check(text, &args, ieee(), Tolerance::Exact);
}

#[test]
fn data_movement_and_constants() {
    let text = "HloModule m\nENTRY main {\n  x = c64[2,3] parameter(0)\n  s = s32[] parameter(1)\n  \
         k = c64[] constant((1.5, -2.5))\n  kv = c64[3] constant({(1, 2), (-0, nan), (inf, -3e38)})\n  \
         bc = c64[4,2,3] broadcast(x), dimensions={1,2}\n  rs = c64[3,2] reshape(x)\n  \
         tr = c64[3,2] transpose(x), dimensions={1,0}\n  sl = c64[2,2] slice(x), slice={[0:2], [1:3]}\n  \
         cc = c64[4,3] concatenate(x, x), dimensions={0}\n  \
         pd = c64[5,6] pad(x, k), padding=1_2x0_1_1\n  rv = c64[2,3] reverse(x), dimensions={0,1}\n  \
         ds = c64[1,2] dynamic-slice(x, s, s), dynamic_slice_sizes={1,2}\n  \
         up = c64[1,2] broadcast(k), dimensions={}\n  \
         dus = c64[2,3] dynamic-update-slice(x, up, s, s)\n  \
         kb = c64[2,3] broadcast(kv), dimensions={1}\n  ad = c64[2,3] add(x, kb)\n  \
         idx = s32[2,1] constant({{1}, {0}})\n  \
         ga = c64[2,3] gather(x, idx), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}\n  \
         ROOT o = (c64[4,2,3], c64[3,2], c64[3,2], c64[2,2], c64[4,3], c64[5,6], c64[2,3], c64[1,2], c64[2,3], c64[2,3], c64[2,3]) \
         tuple(bc, rs, tr, sl, cc, pd, rv, ds, dus, ad, ga)\n}\n";
    let x = pairs(6, 3);
    let args = [
        complex(ElementType::C64, &[2, 3], &x),
        Literal::Array(ArrayLiteral::from_slice(&[], &[1i32])),
    ];
    check(text, &args, ieee(), Tolerance::Exact);
}

#[test]
fn reductions_with_complex_reducers() {
    for ty in [ElementType::C64, ElementType::C128] {
        let t = ty.name();
        let text = format!(
            "HloModule m\nadd {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n  ROOT r = {t}[] add(a, b)\n}}\n\
             mul {{\n  c = {t}[] parameter(0)\n  d = {t}[] parameter(1)\n  ROOT q = {t}[] multiply(c, d)\n}}\n\
             ENTRY main {{\n  x = {t}[4,6] parameter(0)\n  z = {t}[] constant((0, 0))\n  \
             one = {t}[] constant((1, 0))\n  s = {t}[4] reduce(x, z), dimensions={{1}}, to_apply=add\n  \
             p = {t}[6] reduce(x, one), dimensions={{0}}, to_apply=mul\n  \
             all = {t}[] reduce(x, z), dimensions={{0,1}}, to_apply=add\n  \
             w = {t}[4,3] reduce-window(x, z), window={{size=1x2 stride=1x2}}, to_apply=add\n  \
             ROOT o = ({t}[4], {t}[6], {t}[], {t}[4,3]) tuple(s, p, all, w)\n}}\n"
        );
        let args = [complex(ty, &[4, 6], &pairs(24, 4))];
        check(
            &text,
            &args,
            ieee(),
            Tolerance::Close {
                rtol: 1e-5,
                atol: 1e-6,
            },
        );
    }
}

#[test]
fn complex_dots() {
    /// Operand, result shapes, dimension numbers and operand dimensions.
    type Case<'a> = (&'a str, &'a str, &'a str, &'a str, &'a [i64], &'a [i64]);
    let cases: [Case; 4] = [
        ("c64[3,4]", "c64[4,5]", "c64[3,5]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}", &[3, 4], &[4, 5]),
        ("c64[7]", "c64[7]", "c64[]", "lhs_contracting_dims={0}, rhs_contracting_dims={0}", &[7], &[7]),
        (
            "c128[2,3,4]",
            "c128[2,4,2]",
            "c128[2,3,2]",
            "lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}",
            &[2, 3, 4],
            &[2, 4, 2],
        ),
        ("c64[5,3]", "c64[3]", "c64[5]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}", &[5, 3], &[3]),
    ];
    for (k, (ls, rs, os, dn, ld, rd)) in cases.iter().enumerate() {
        check_contraction(
            ls,
            rs,
            os,
            &format!("dot(a, b), {dn}"),
            ld,
            rd,
            10 + k as u64,
        );
    }
}

#[test]
fn complex_convolutions() {
    let cases = [
        // 1-D, padded, two feature groups.
        (
            "c64[2,4,9]",
            "c64[2,2,3]",
            "c64[2,2,9]",
            "window={size=3 pad=1_1}, dim_labels=bf0_oi0->bf0, feature_group_count=2",
            &[2i64, 4, 9][..],
            &[2i64, 2, 3][..],
        ),
        // 2-D NHWC, strided, dilated kernel.
        (
            "c64[1,6,6,2]",
            "c64[2,2,2,3]",
            "c64[1,3,4,3]",
            "window={size=2x2 stride=2x1 rhs_dilate=1x2}, dim_labels=b01f_01io->b01f",
            &[1, 6, 6, 2][..],
            &[2, 2, 2, 3][..],
        ),
        // c128, lhs dilation.
        (
            "c128[1,2,4]",
            "c128[3,2,2]",
            "c128[1,3,8]",
            "window={size=2 pad=1_1 lhs_dilate=2}, dim_labels=bf0_oi0->bf0",
            &[1, 2, 4][..],
            &[3, 2, 2][..],
        ),
    ];
    for (k, (ls, rs, os, attrs, ld, rd)) in cases.iter().enumerate() {
        let op = format!("convolution(a, b), {attrs}");
        check_contraction(ls, rs, os, &op, ld, rd, 30 + k as u64);
    }
}

/// Checks `ROOT {os} {op}` of complex parameters `a: {ls}` and `b: {rs}` (dimensions `ld`,
/// `rd`) on random values.
fn check_contraction(ls: &str, rs: &str, os: &str, op: &str, ld: &[i64], rd: &[i64], seed: u64) {
    let ty = if ls.starts_with("c128") {
        ElementType::C128
    } else {
        ElementType::C64
    };
    let text = format!(
        "HloModule m\nENTRY main {{\n  a = {ls} parameter(0)\n  b = {rs} parameter(1)\n  \
         ROOT r = {os} {op}\n}}\n"
    );
    let (nl, nr) = (ld.iter().product::<i64>(), rd.iter().product::<i64>());
    let args = [
        complex(ty, ld, &pairs(nl as usize, seed)),
        complex(ty, rd, &pairs(nr as usize, seed + 100)),
    ];
    let tol = Tolerance::Close {
        rtol: 1e-6,
        atol: 1e-6,
    };
    check(&text, &args, ieee(), tol);
}

#[test]
fn loops_carry_complex_state() {
    let text = "HloModule m\ncond {\n  s = (s32[], c64[3]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n  \
         n = s32[] constant(5)\n  ROOT c = pred[] compare(i, n), direction=LT\n}\n\
         body {\n  bs = (s32[], c64[3]) parameter(0)\n  bi = s32[] get-tuple-element(bs), index=0\n  \
         z = c64[3] get-tuple-element(bs), index=1\n  one = s32[] constant(1)\n  j = s32[] add(bi, one)\n  \
         w = c64[3] multiply(z, z)\n  k = c64[] constant((0.5, 0.25))\n  kb = c64[3] broadcast(k), dimensions={}\n  \
         v = c64[3] add(w, kb)\n  ROOT bt = (s32[], c64[3]) tuple(j, v)\n}\n\
         ENTRY main {\n  x = c64[3] parameter(0)\n  i0 = s32[] constant(0)\n  t = (s32[], c64[3]) tuple(i0, x)\n  \
         r = (s32[], c64[3]) while(t), condition=cond, body=body\n  ROOT o = c64[3] get-tuple-element(r), index=1\n}\n";
    let args = [complex(
        ElementType::C64,
        &[3],
        &[(0.1, 0.2), (-0.3, 0.0), (0.0, -0.4)],
    )];
    check(text, &args, ieee(), Tolerance::Exact);
}

/// Compiles `text` on the CPU backend and returns the error message.
fn compile_error(text: &str) -> String {
    let m = parse_module(text).unwrap_or_else(|e| panic!("parse: {e}\n{text}"));
    match compile(&m, &CpuOptions::default()) {
        Ok(_) => panic!("expected a compile error for\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn undefined_complex_ops_are_errors() {
    // Each is refused by the verifier or the code generator, naming the instruction.
    let cases = [
        ("pred[2] convert(x)", "convert"),
        ("pred[2] compare(x, x), direction=LT", "compare"),
        ("s64[2] bitcast-convert(x)", "bitcast-convert"),
        ("c64[2] maximum(x, x)", "maximum"),
        ("c64[2] remainder(x, x)", "remainder"),
        ("c64[2] clamp(x, x, x)", "clamp"),
        ("c64[2] floor(x)", "floor"),
        ("c64[2] logistic(x)", "logistic"),
        ("c64[2] cbrt(x)", "cbrt"),
        ("c64[2] atan2(x, x)", "atan2"),
    ];
    for (op, name) in cases {
        let text =
            format!("HloModule m\nENTRY main {{\n  x = c64[2] parameter(0)\n  ROOT r = {op}\n}}\n");
        let e = compile_error(&text);
        assert!(
            e.contains(&format!("%r ({name})")) || e.contains(&format!("%r: {name}:")),
            "{op}: {e}"
        );
    }
}

#[test]
fn complex_elementwise_loops_are_vectorized() {
    let text =
        "HloModule m\nENTRY main {\n  x = c64[4096] parameter(0)\n  y = c64[4096] parameter(1)\n  \
         ROOT p = c64[4096] multiply(x, y)\n}\n";
    let m = parse_module(text).expect("parses");
    let ir =
        axle_codegen_cpu::emit_text(&m, &CpuOptions::default(), axle_codegen_cpu::Emit::LlvmIr)
            .expect("compiles");
    let vector_mul = ir
        .lines()
        .any(|l| l.contains("fmul <") && l.contains(" x float>"));
    assert!(vector_mul, "no vector fmul in the optimized IR:\n{ir}");
}

#[test]
fn scatter_sort_and_map_on_complex_values() {
    let text = "HloModule m\nadd {\n  a = c64[] parameter(0)\n  b = c64[] parameter(1)\n  ROOT r = c64[] add(a, b)\n}\n\
         less {\n  p = c64[] parameter(0)\n  q = c64[] parameter(1)\n  pr = f32[] real(p)\n  qr = f32[] real(q)\n  \
         ROOT l = pred[] compare(pr, qr), direction=LT\n}\n\
         sq {\n  z = c64[] parameter(0)\n  ROOT s = c64[] multiply(z, z)\n}\n\
         ENTRY main {\n  x = c64[6] parameter(0)\n  u = c64[3] parameter(1)\n  \
         i = s32[3,1] constant({{4}, {0}, {4}})\n  \
         sc = c64[6] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n  \
         so = c64[6] sort(x), dimensions={0}, to_apply=less\n  mp = c64[6] map(x), dimensions={0}, to_apply=sq\n  \
         ROOT o = (c64[6], c64[6], c64[6]) tuple(sc, so, mp)\n}\n";
    let args = [
        complex(ElementType::C64, &[6], &pairs(6, 50)),
        complex(ElementType::C64, &[3], &pairs(3, 51)),
    ];
    check(text, &args, ieee(), Tolerance::Exact);
}

/// Quotients Smith's algorithm leaves as NaN + NaN i are recovered as C99's Annex G and XLA
/// recover them, on the evaluator and the CPU backend alike: an infinite numerator over a
/// finite divisor is infinite, a finite numerator over an infinite divisor is a signed zero
/// (values from XLA's `complex_unary_op_test` and checked against XLA CPU).
#[test]
fn division_recovers_infinities_and_zeros_as_annex_g() {
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let x = [
        (1.0, 1.0),
        (inf, nan),
        (-inf, 2.0),
        (3.0, -4.0),
        (nan, nan),
        (inf, inf),
    ];
    let y = [
        (nan, inf),
        (1.0, 1.0),
        (2.0, 0.0),
        (-inf, nan),
        (1.0, 2.0),
        (inf, 1.0),
    ];
    // XLA CPU's quotients (jax 0.10.2), signed zeros told apart, any NaN matching NaN.
    let want: [(f64, f64); 6] = [
        (0.0, -0.0),
        (inf, -inf),
        (-inf, nan),
        (-0.0, 0.0),
        (nan, nan),
        (nan, nan),
    ];
    for ty in [ElementType::C64, ElementType::C128] {
        let t = ty.name();
        let text = divide6(t);
        let args = [complex(ty, &[6], &x), complex(ty, &[6], &y)];
        check(&text, &args, ieee(), Tolerance::Exact);
        let m = parse_module(&text).unwrap();
        let got = compile(&m, &ieee()).unwrap().run_literals(&args).unwrap();
        // The parts of element `k`, from the literal's bytes.
        let part = |k: usize, p: usize| -> f64 {
            let d = &got[0].data;
            if ty == ElementType::C64 {
                let o = 8 * k + 4 * p;
                f32::from_le_bytes(d[o..o + 4].try_into().unwrap()) as f64
            } else {
                let o = 16 * k + 8 * p;
                f64::from_le_bytes(d[o..o + 8].try_into().unwrap())
            }
        };
        for (k, &(re, im)) in want.iter().enumerate() {
            let (gr, gi) = (part(k, 0), part(k, 1));
            let same = |a: f64, b: f64| {
                (a.is_nan() && b.is_nan())
                    || (a == b && a.is_sign_negative() == b.is_sign_negative())
            };
            assert!(
                same(gr, re) && same(gi, im),
                "{t}: {:?} / {:?} gave ({gr}, {gi}), want ({re}, {im})",
                x[k],
                y[k]
            );
        }
    }
}
