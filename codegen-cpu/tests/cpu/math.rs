//! The inline `f32` transcendentals against the platform's libm over their whole range:
//! special values exactly, everything else within a few ulps (`erf` within one ulp of the
//! correctly rounded value, on a dense sweep of every binade).

use axle_codegen_cpu::{compile, CpuOptions};
use axle_ir::{parse_module, ArrayLiteral, Literal};

/// Sample points: a dense sweep, powers of two of both signs, and special values.
fn samples() -> Vec<f32> {
    let mut v = Vec::new();
    for i in -22000..=22000 {
        v.push(i as f32 * 0.005);
    }
    for e in -149..=127 {
        let p = 2f32.powi(e);
        v.extend([p, -p, p * 1.3, -p * 1.7]);
    }
    v.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        f32::MAX,
        f32::MIN,
        88.72,
        88.73,
        -87.33,
        -103.9,
        -104.5,
        1e-40,
        3e-4,
        -3e-4,
        4.5e-4,
    ]);
    v
}

fn run(op: &str, xs: &[f32]) -> Vec<f32> {
    // Gradual underflow, as libm computes it.
    run_with(
        op,
        xs,
        &CpuOptions {
            flush_denormals: false,
            ..Default::default()
        },
    )
}

fn run_with(op: &str, xs: &[f32], opts: &CpuOptions) -> Vec<f32> {
    let n = xs.len();
    let text = format!(
        "HloModule m\nENTRY main {{\n  x = f32[{n}] parameter(0)\n  ROOT y = f32[{n}] {op}(x)\n}}\n"
    );
    let m = parse_module(&text).expect("parses");
    let exe = compile(&m, opts).expect("compiles");
    let out = exe
        .run_literals(&[Literal::Array(ArrayLiteral::from_slice(&[n as i64], xs))])
        .expect("runs");
    out[0].to_vec::<f32>().expect("f32 result")
}

/// Distance in ulps between two floats of the same sign (monotone bit patterns).
fn ulps(a: f32, b: f32) -> u64 {
    let key = |x: f32| {
        let i = x.to_bits() as i32;
        if i < 0 {
            i64::from(i32::MIN) - i64::from(i)
        } else {
            i64::from(i)
        }
    };
    (key(a) - key(b)).unsigned_abs()
}

fn check(op: &str, f: fn(f32) -> f32, max_ulps: u64, abs: f32) {
    let xs = samples();
    let got = run(op, &xs);
    let mut worst = (0u64, 0f32);
    for (&x, &g) in xs.iter().zip(&got) {
        let w = f(x);
        if w.is_nan() || g.is_nan() {
            assert!(
                w.is_nan() && g.is_nan(),
                "{op}({x:e}) = {g:e}, libm says {w:e}"
            );
            continue;
        }
        if w.is_infinite() || w == 0.0 {
            assert!(
                g == w || (w == 0.0 && g.abs() <= abs),
                "{op}({x:e}) = {g:e}, libm says {w:e}"
            );
            continue;
        }
        let u = ulps(g, w);
        if u > worst.0 {
            worst = (u, x);
        }
        assert!(
            u <= max_ulps || (g - w).abs() <= abs,
            "{op}({x:e}) = {g:e}, libm says {w:e} ({u} ulps)"
        );
    }
    eprintln!("{op}: worst {} ulps at {:e}", worst.0, worst.1);
}

/// By default subnormals are flushed (XLA's CPU semantics) on every thread; without the flag,
/// gradual underflow.
#[test]
fn subnormals_are_flushed_by_default() {
    let n = 1 << 17;
    let text = format!(
        "HloModule m\nENTRY main {{\n  x = f32[{n}] parameter(0)\n  y = f32[{n}] parameter(1)\n  ROOT z = f32[{n}] multiply(x, y)\n}}\n"
    );
    let m = parse_module(&text).expect("parses");
    let xs = vec![1e-20f32; n];
    let ys = vec![1e-20f32; n];
    let args = [
        Literal::Array(ArrayLiteral::from_slice(&[n as i64], &xs)),
        Literal::Array(ArrayLiteral::from_slice(&[n as i64], &ys)),
    ];
    for (flush, threads) in [(true, 1), (true, 4), (false, 1), (false, 4)] {
        let opts = CpuOptions {
            threads,
            flush_denormals: flush,
            ..Default::default()
        };
        let exe = compile(&m, &opts).expect("compiles");
        let out = exe.run_literals(&args).expect("runs")[0]
            .to_vec::<f32>()
            .unwrap();
        let want = if flush { 0.0 } else { 1e-20f32 * 1e-20f32 };
        assert!(want == 0.0 || want.is_subnormal());
        assert!(
            out.iter().all(|&v| v == want),
            "flush={flush} threads={threads}: {}",
            out[n - 1]
        );
    }
}

#[test]
fn exp_is_within_two_ulps() {
    check("exponential", f32::exp, 2, 1e-44);
}

#[test]
fn log_is_within_two_ulps() {
    check("log", f32::ln, 2, 0.0);
}

#[test]
fn tanh_is_within_a_few_ulps() {
    check("tanh", f32::tanh, 4, 0.0);
}

/// The C library's `f64` `erf` (Rust's standard library has none), rounded to `f32`: the
/// correctly rounded `f32` value but where the `f64` result falls within its error of a
/// rounding boundary, which the exhaustive comparison behind [`erf_is_within_one_ulp`] never
/// met.
fn c_erf(x: f32) -> f32 {
    extern "C" {
        fn erf(x: f64) -> f64;
    }
    // SAFETY: `erf` is a pure function of its argument in every C library.
    unsafe { erf(f64::from(x)) as f32 }
}

/// The inline `erf` (`axle_codegen_llvm::math::erf`) is at most one ulp from the correctly
/// rounded value. Its doc states the exhaustive measurement (0.991 ulp); here a sweep of bit
/// patterns through every binade of both signs, every float around the two pieces' boundary
/// at `|x| = 1` and where the result reaches 1 (`|x|` = 3.9192), and [`samples`].
#[test]
fn erf_is_within_one_ulp() {
    let mut xs = samples();
    xs.extend(
        (0..0x7f80_0000u32)
            .step_by(1021)
            .map(f32::from_bits)
            .flat_map(|x| [x, -x]),
    );
    for (lo, hi) in [(0.992f32, 1.008f32), (3.91, 3.93)] {
        xs.extend(
            (lo.to_bits()..=hi.to_bits())
                .map(f32::from_bits)
                .flat_map(|x| [x, -x]),
        );
    }
    let got = run("erf", &xs);
    let mut worst = (0u64, 0f32);
    for (&x, &g) in xs.iter().zip(&got) {
        let w = c_erf(x);
        if w.is_nan() {
            assert!(g.is_nan(), "erf({x:e}) = {g:e}, not NaN");
            continue;
        }
        assert!(
            g.is_sign_negative() == w.is_sign_negative(),
            "erf({x:e}) = {g:e}, libm says {w:e}"
        );
        let u = ulps(g, w);
        assert!(u <= 1, "erf({x:e}) = {g:e}, libm says {w:e} ({u} ulps)");
        if u > worst.0 {
            worst = (u, x);
        }
    }
    eprintln!(
        "erf: worst {} ulps at {:e} over {} inputs",
        worst.0,
        worst.1,
        xs.len()
    );
}

/// `erf`'s special values, bit for bit: signed zeros and infinities, NaN of either sign, and
/// subnormal inputs, which XLA's default flushing (FTZ and DAZ) turns into zeros of their sign
/// and gradual underflow computes (`2/sqrt(pi) * x`, correctly rounded).
#[test]
fn erf_special_values() {
    let tiny = f32::from_bits(1);
    let sub = f32::from_bits(0x0040_0000);
    let xs = [
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        tiny,
        -tiny,
        sub,
        -sub,
        4.0,
        -4.0,
        f32::MAX,
        f32::MIN,
    ];
    let flushed = run_with("erf", &xs, &CpuOptions::default());
    let gradual = run("erf", &xs);
    let want_flushed = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        f32::NAN,
        -f32::NAN,
        0.0,
        -0.0,
        0.0,
        -0.0,
        1.0,
        -1.0,
        1.0,
        -1.0,
    ];
    for (k, (&x, &w)) in xs.iter().zip(&want_flushed).enumerate() {
        let g = flushed[k];
        if w.is_nan() {
            assert!(g.is_nan(), "flushed erf({x:e}) = {g:e}, not NaN");
        } else {
            assert_eq!(g.to_bits(), w.to_bits(), "flushed erf({x:e}) = {g:e}");
        }
        let g = gradual[k];
        let w = if x.is_subnormal() { c_erf(x) } else { w };
        assert!(!x.is_subnormal() || w != 0.0, "erf({x:e}) is not zero");
        if w.is_nan() {
            assert!(g.is_nan(), "erf({x:e}) = {g:e}, not NaN");
        } else {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "erf({x:e}) = {g:e}, libm says {w:e}"
            );
        }
    }
}
