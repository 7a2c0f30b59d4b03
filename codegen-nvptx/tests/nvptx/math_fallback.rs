//! Math functions without libdevice: the inline forms of `axle_codegen_llvm::libm_fallback`,
//! run on the host simulator (no libdevice) against the evaluator (the host's C math library,
//! subnormals kept as the kernels keep them)
//! on special values, every binade that `sin`, `cos` and `tan` reduce by table (one argument
//! per `f64` exponent from `2^19` to the largest), and random arguments; in `f64`, in `f32`,
//! and through the complex functions that call `sinh`, `cosh` and `hypot`. Their PTX has no
//! call left and assembles with ptxas where it is present.
//!
//! Tolerances, relative: `f64` 1e-14 (about 45 ulps; the forms are within about 10 ulps),
//! `power` 2e-13 (its error grows with `|y log x|`, up to about 700 ulps for results near
//! the largest double); `f32` 2.4e-7 (2 ulps; the forms compute in `f64` and round once).

use axle_analysis::eval::{evaluate_with, EvalOptions};
use axle_codegen_nvptx::{emit_text, Emit, GpuArch, NvptxOptions};
use axle_ir::{compare_arrays, ElementType, Literal, Tolerance};
use axle_testkit::{leaves, noise, real_array};

mod common;
use common::{module, run_sim};

/// The first argument: special values, then one per binade of the table reduction, then
/// random values of every magnitude.
fn xs() -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        -2.0,
        1e-300,
        5e-324,
        -3e-310,
        1e-10,
        -1e-10,
        0.1,
        3.0,
        std::f64::consts::PI,
        std::f64::consts::FRAC_PI_2,
        10.0,
        22.0,
        30.0,
        100.0,
        -100.0,
        700.0,
        709.7,
        710.0,
        800.0,
        -700.0,
        -745.0,
        -800.0,
        1e5,
        524_287.9,
        524_288.0,
        6e5,
        1e6,
        1e9,
        1e15,
        1e22,
        -1e22,
        1e100,
        1e300,
        f64::MAX,
        // The double nearest a multiple of pi/2 (Kahan and McDonald): its remainder is tiny.
        6_381_956_970_095_103.0 * 2f64.powi(797),
    ];
    for e in 19..=1023 {
        let m = 1.0 + noise(3, e as u64).abs();
        v.push(m * 2f64.powi(e));
    }
    for i in 0..400 {
        let mag = 10f64.powf(noise(5, i) * 8.0);
        v.push(noise(7, i) * mag);
    }
    v
}

/// The second argument of `power`, `atan2` and `complex`: small integers, halves, specials,
/// and random values, cycled against [`xs`].
fn ys(n: usize) -> Vec<f64> {
    let pick = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.0,
        3.0,
        -3.0,
        0.5,
        -0.5,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e-3,
        7.25,
        -40.0,
    ];
    (0..n)
        .map(|i| {
            if i % 3 == 0 {
                pick[(i / 3) % pick.len()]
            } else {
                noise(11, i as u64) * 20.0
            }
        })
        .collect()
}

/// Runs `ops` (names of unary ops, and `power`, `atan2`) of `ty` on the simulator without
/// libdevice and compares each with the evaluator.
fn check(ty: &str, n: usize, body: &str, outs: &[(&str, Tolerance)]) {
    let tys: Vec<String> = outs.iter().map(|_| format!("{ty}[{n}]")).collect();
    let names: Vec<&str> = outs.iter().map(|o| o.0).collect();
    let text = format!(
        "HloModule m\nENTRY e {{\n  x = f64[{n}] parameter(0)\n  y = f64[{n}] parameter(1)\n{body}  \
         ROOT r = ({}) tuple({})\n}}\n",
        tys.join(", "),
        names.join(", ")
    );
    let m = module(&text);
    let x = xs();
    let y = ys(n);
    let args: Vec<Literal> = vec![
        real_array(ElementType::F64, &[n as i64], |i| x[i]),
        real_array(ElementType::F64, &[n as i64], |i| y[i]),
    ];
    let got = run_sim(&m, &args).unwrap_or_else(|e| panic!("{e}"));
    // The kernels keep subnormals (IEEE gradual underflow), as the evaluator does without FTZ.
    let ieee = EvalOptions {
        flush_denormals: false,
    };
    let want = leaves(&evaluate_with(&m, &args, &ieee).unwrap_or_else(|e| panic!("{e}")));
    for ((g, w), (name, tol)) in got.iter().zip(&want).zip(outs) {
        compare_arrays(w, g, *tol).unwrap_or_else(|e| panic!("{ty} {name}: {e}"));
    }
    for arch in GpuArch::ALL {
        let opts = NvptxOptions {
            gpu_arch: arch,
            ..Default::default()
        };
        let p = emit_text(&m, &opts, Emit::Ptx).unwrap_or_else(|e| panic!("{e}"));
        assert!(!p.contains("call") && !p.contains("__nv_"), "{p}");
        if let Some(x) = axle_codegen_nvptx::ptxas::find_ptxas() {
            axle_codegen_nvptx::ptxas::assemble(&x, &p, arch, "math_fallback")
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

const F64: Tolerance = Tolerance::Close {
    rtol: 1e-14,
    atol: 1e-320,
};
const F64_POW: Tolerance = Tolerance::Close {
    rtol: 2e-13,
    atol: 1e-320,
};
const F32: Tolerance = Tolerance::Close {
    rtol: 2.4e-7,
    atol: 1e-44,
};

#[test]
fn f64_math_without_libdevice_matches_the_host_library() {
    let n = xs().len();
    let body = "  ex = f64[N] exponential(x)\n  em = f64[N] exponential-minus-one(x)\n  \
                lg = f64[N] log(x)\n  lp = f64[N] log-plus-one(x)\n  sn = f64[N] sine(x)\n  \
                cs = f64[N] cosine(x)\n  tn = f64[N] tan(x)\n  th = f64[N] tanh(x)\n  \
                cb = f64[N] cbrt(x)\n  ef = f64[N] erf(x)\n  pw = f64[N] power(x, y)\n  \
                at = f64[N] atan2(x, y)\n"
        .replace('N', &n.to_string());
    check(
        "f64",
        n,
        &body,
        &[
            ("ex", F64),
            ("em", F64),
            ("lg", F64),
            ("lp", F64),
            ("sn", F64),
            ("cs", F64),
            ("tn", F64),
            ("th", F64),
            ("cb", F64),
            ("ef", F64),
            ("pw", F64_POW),
            ("at", F64),
        ],
    );
}

#[test]
fn f32_math_without_libdevice_matches_the_host_library() {
    let n = xs().len();
    let body = "  a = f32[N] convert(x)\n  b = f32[N] convert(y)\n  \
                em = f32[N] exponential-minus-one(a)\n  lp = f32[N] log-plus-one(a)\n  \
                sn = f32[N] sine(a)\n  cs = f32[N] cosine(a)\n  tn = f32[N] tan(a)\n  \
                cb = f32[N] cbrt(a)\n  pw = f32[N] power(a, b)\n  at = f32[N] atan2(a, b)\n"
        .replace('N', &n.to_string());
    check(
        "f32",
        n,
        &body,
        &[
            ("em", F32),
            ("lp", F32),
            ("sn", F32),
            ("cs", F32),
            ("tn", F32),
            ("cb", F32),
            ("pw", F32),
            ("at", F32),
        ],
    );
}

#[test]
fn complex_functions_without_libdevice_match_the_host_library() {
    // Moderate magnitudes: the complex forms combine several functions, whose errors the
    // host's forms share only in part.
    let n = xs().len();
    let body = "  xc = f64[N] clamp(f64[] constant(-30), x, f64[] constant(30))\n  \
                yc = f64[N] clamp(f64[] constant(-30), y, f64[] constant(30))\n  \
                z = c128[N] complex(xc, yc)\n  ab = f64[N] abs(z)\n  \
                cz = c128[N] cosine(z)\n  cr = f64[N] real(cz)\n  ci = f64[N] imag(cz)\n"
        .replace('N', &n.to_string());
    check("f64", n, &body, &[("ab", F64), ("cr", F64), ("ci", F64)]);
}
