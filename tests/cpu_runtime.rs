//! The CPU backend's runtime library (host calls): `fft`, `cholesky`, `triangular-solve` and
//! JAX's LAPACK custom calls against the reference evaluator over their attributes and element
//! types, LAPACK's conventions on singular matrices (`info`, pivots, the untouched triangle),
//! host calls inside loops, clear errors for what the library does not do, and the refusal of
//! ahead-of-time objects that would need it.

use axle::ir::literal::{complex_to_element, f64_to_element};
use axle::ir::{
    compare_arrays, parse_module, ArrayLiteral, ArrayShape, ElementType, Literal, Module, Tolerance,
};
use axle_codegen_cpu::{compile, compile_aot, CpuOptions};
use axle_testkit::noise;

/// An array of type `ty` whose element at flat index `k` is `f(k)` (`(re, im)`; the imaginary
/// part is dropped for real types).
fn array(ty: ElementType, dims: &[i64], f: impl Fn(usize) -> (f64, f64)) -> Literal {
    let n: i64 = dims.iter().product();
    let mut data = Vec::new();
    for k in 0..n as usize {
        let (re, im) = f(k);
        if ty.is_complex() {
            data.extend(complex_to_element(ty, re, im));
        } else {
            data.extend(f64_to_element(ty, re));
        }
    }
    Literal::Array(ArrayLiteral {
        shape: ArrayShape::new(ty, dims),
        data,
    })
}

/// Random values.
fn random(ty: ElementType, dims: &[i64], seed: u64) -> Literal {
    array(ty, dims, |k| {
        (noise(seed, 2 * k as u64), noise(seed, 2 * k as u64 + 1))
    })
}

/// Batches of `n`-by-`n` Hermitian positive definite matrices `B B^H + n I`.
fn positive_definite(ty: ElementType, batch: i64, n: i64, seed: u64) -> Literal {
    let nn = n as usize;
    let cplx = ty.is_complex();
    let b = |bt: usize, i: usize, j: usize| {
        let k = ((bt * nn + i) * nn + j) as u64;
        let im = if cplx { noise(seed, 2 * k + 1) } else { 0.0 };
        (noise(seed, 2 * k), im)
    };
    array(ty, &[batch, n, n], |k| {
        let (bt, i, j) = (k / (nn * nn), k / nn % nn, k % nn);
        let (mut re, mut im) = if i == j { (n as f64, 0.0) } else { (0.0, 0.0) };
        for t in 0..nn {
            let (ar, ai) = b(bt, i, t);
            let (br, bi) = b(bt, j, t);
            // a * conj(b)
            re += ar * br + ai * bi;
            im += ai * br - ar * bi;
        }
        (re, im)
    })
}

/// Random matrices with a dominant diagonal (well-conditioned triangles).
fn dominant(ty: ElementType, dims: &[i64], seed: u64) -> Literal {
    let n = dims[dims.len() - 1] as usize;
    let r = dims[dims.len() - 2] as usize;
    array(ty, dims, |k| {
        let (i, j) = (k / n % r, k % n);
        let (re, im) = (noise(seed, 2 * k as u64), noise(seed, 2 * k as u64 + 1));
        if i == j {
            (re + 2.0 + n as f64, im)
        } else {
            (re, im)
        }
    })
}

fn evaluate(m: &Module, args: &[Literal]) -> Vec<ArrayLiteral> {
    axle::run::flatten(axle::analysis::eval::evaluate(m, args).expect("the evaluator runs it"))
}

fn run_cpu(m: &Module, args: &[Literal]) -> Vec<ArrayLiteral> {
    compile(m, &CpuOptions::default())
        .unwrap_or_else(|e| panic!("compiles: {e}"))
        .run_literals(args)
        .unwrap_or_else(|e| panic!("runs: {e}"))
}

fn tolerance(a: &ArrayLiteral) -> Tolerance {
    match a.ty() {
        ElementType::F32 | ElementType::C64 => Tolerance::Close {
            rtol: 1e-4,
            atol: 1e-4,
        },
        ElementType::F64 | ElementType::C128 => Tolerance::Close {
            rtol: 1e-10,
            atol: 1e-10,
        },
        _ => Tolerance::Exact,
    }
}

/// Runs `text` on the CPU backend and the evaluator and compares every output.
fn check(text: &str, args: &[Literal]) {
    let m = parse_module(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    axle::verify_module(&m).unwrap_or_else(|e| panic!("{text}: {e}"));
    let want = evaluate(&m, args);
    let got = run_cpu(&m, args);
    assert_eq!(want.len(), got.len());
    for (k, (w, g)) in want.iter().zip(&got).enumerate() {
        compare_arrays(w, g, tolerance(w)).unwrap_or_else(|e| panic!("{text}\nout{k}: {e}"));
    }
}

fn dims_text(d: &[i64]) -> String {
    d.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn ffts_match_the_evaluator() {
    // (full dims, number of transformed dimensions)
    let shapes: &[(&[i64], usize)] = &[
        (&[8], 1),
        (&[7], 1),
        (&[3, 9], 1),
        (&[2, 5, 6], 2),
        (&[2, 3, 4, 5], 3),
        (&[4, 1], 2),
    ];
    for (real, cplx) in [("f32", "c64"), ("f64", "c128")] {
        let rt = ElementType::from_name(real).unwrap();
        let ct = ElementType::from_name(cplx).unwrap();
        for (seed, &(dims, axes)) in shapes.iter().enumerate() {
            let seed = seed as u64;
            let lengths = dims_text(&dims[dims.len() - axes..]);
            let full = dims_text(dims);
            let mut half = dims.to_vec();
            let last = half.len() - 1;
            half[last] = dims[last] / 2 + 1;
            let half_t = dims_text(&half);
            for kind in ["FFT", "IFFT"] {
                let text = format!(
                    "HloModule f\nENTRY main {{\n  x = {cplx}[{full}] parameter(0)\n  ROOT f = {cplx}[{full}] fft(x), fft_type={kind}, fft_length={{{lengths}}}\n}}\n"
                );
                check(&text, &[random(ct, dims, seed)]);
            }
            let text = format!(
                "HloModule f\nENTRY main {{\n  x = {real}[{full}] parameter(0)\n  ROOT f = {cplx}[{half_t}] fft(x), fft_type=RFFT, fft_length={{{lengths}}}\n}}\n"
            );
            check(&text, &[random(rt, dims, seed)]);
            let text = format!(
                "HloModule f\nENTRY main {{\n  x = {cplx}[{half_t}] parameter(0)\n  ROOT f = {real}[{full}] fft(x), fft_type=IRFFT, fft_length={{{lengths}}}\n}}\n"
            );
            check(&text, &[random(ct, &half, seed)]);
        }
    }
}

#[test]
fn cholesky_matches_the_evaluator() {
    for ty in ["f32", "f64", "c64", "c128"] {
        let t = ElementType::from_name(ty).unwrap();
        for lower in [true, false] {
            let text = format!(
                "HloModule c\nENTRY main {{\n  a = {ty}[3,5,5] parameter(0)\n  ROOT l = {ty}[3,5,5] cholesky(a), lower={lower}\n}}\n"
            );
            check(&text, &[positive_definite(t, 3, 5, 7)]);
        }
    }
    // Not positive definite: NaNs from the failing column on, as the evaluator gives.
    let text = "HloModule c\nENTRY main {\n  a = f32[2,2] parameter(0)\n  ROOT l = f32[2,2] cholesky(a), lower=true\n}\n";
    let a = array(ElementType::F32, &[2, 2], |k| {
        ([1.0, 2.0, 2.0, 1.0][k], 0.0)
    });
    check(text, &[a]);
}

#[test]
fn triangular_solves_match_the_evaluator() {
    for ty in ["f32", "f64", "c64", "c128"] {
        let t = ElementType::from_name(ty).unwrap();
        for left in [true, false] {
            for lower in [true, false] {
                for trans in ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"] {
                    for unit in [false, true] {
                        let b = if left { [2, 4, 3] } else { [2, 3, 4] };
                        let text = format!(
                            "HloModule t\nENTRY main {{\n  a = {ty}[2,4,4] parameter(0)\n  b = {ty}[{}] parameter(1)\n  ROOT x = {ty}[{}] triangular-solve(a, b), left_side={left}, lower={lower}, transpose_a={trans}, unit_diagonal={unit}\n}}\n",
                            dims_text(&b),
                            dims_text(&b)
                        );
                        check(&text, &[dominant(t, &[2, 4, 4], 3), random(t, &b, 4)]);
                    }
                }
            }
        }
    }
}

fn lapack_text(ty: &str, target: &str, operands: &[String], result: &str, config: &str) -> String {
    let params: Vec<String> = operands
        .iter()
        .enumerate()
        .map(|(k, s)| format!("  p{k} = {s} parameter({k})\n"))
        .collect();
    let names: Vec<String> = (0..operands.len()).map(|k| format!("p{k}")).collect();
    format!(
        "HloModule l\nENTRY main {{\n{}  ROOT r = {result} custom-call({}), custom_call_target=\"lapack_{}{target}_ffi\", api_version=API_VERSION_TYPED_FFI, backend_config={{{config}}}\n}}\n",
        params.concat(),
        names.join(", "),
        prefix(ty)
    )
}

fn prefix(ty: &str) -> &'static str {
    match ty {
        "f32" => "s",
        "f64" => "d",
        "c64" => "c",
        _ => "z",
    }
}

#[test]
fn lapack_calls_match_the_evaluator() {
    for ty in ["f32", "f64", "c64", "c128"] {
        let t = ElementType::from_name(ty).unwrap();
        for uplo in [76, 85] {
            let text = lapack_text(
                ty,
                "potrf",
                &[format!("{ty}[2,4,4]")],
                &format!("({ty}[2,4,4], s32[2])"),
                &format!("uplo = {uplo} : ui8"),
            );
            check(&text, &[positive_definite(t, 2, 4, 11)]);
        }
        for (m, n) in [(4, 4), (6, 3), (3, 5)] {
            let k = m.min(n);
            let text = lapack_text(
                ty,
                "getrf",
                &[format!("{ty}[2,{m},{n}]")],
                &format!("({ty}[2,{m},{n}], s32[2,{k}], s32[2])"),
                "",
            );
            check(&text, &[random(t, &[2, m, n], 13)]);
        }
        for (side, trans, uplo, diag) in [(76, 78, 76, 85), (82, 84, 85, 78), (76, 67, 85, 78)] {
            let b = if side == 76 { "3,4,2" } else { "3,2,4" };
            let text = lapack_text(
                ty,
                "trsm",
                &[format!("{ty}[3,4,4]"), format!("{ty}[{b}]")],
                &format!("{ty}[{b}]"),
                &format!("diag = {diag} : ui8, side = {side} : ui8, trans_x = {trans} : ui8, uplo = {uplo} : ui8"),
            );
            let bd: Vec<i64> = b.split(',').map(|x| x.parse().unwrap()).collect();
            check(&text, &[dominant(t, &[3, 4, 4], 5), random(t, &bd, 6)]);
        }
    }
    for ty in ["f32", "f64"] {
        let t = ElementType::from_name(ty).unwrap();
        let p = prefix(ty);
        for (m, n) in [(6, 4), (4, 4), (3, 5)] {
            let k = m.min(n);
            let text = lapack_text(
                ty,
                "geqrf",
                &[format!("{ty}[2,{m},{n}]")],
                &format!("({ty}[2,{m},{n}], {ty}[2,{k}])"),
                "",
            );
            check(&text, &[random(t, &[2, m, n], 17)]);
        }
        // Q of a QR factorization, complete (orgqr on a padded square matrix) and reduced.
        for (m, n, k) in [(6, 4, 4), (5, 5, 3)] {
            let text = format!(
                "HloModule q\nENTRY main {{\n  a = {ty}[2,{m},{k}] parameter(0)\n  g = ({ty}[2,{m},{k}], {ty}[2,{k}]) custom-call(a), custom_call_target=\"lapack_{p}geqrf_ffi\", backend_config={{}}\n  f = {ty}[2,{m},{k}] get-tuple-element(g), index=0\n  tau = {ty}[2,{k}] get-tuple-element(g), index=1\n  z = {ty}[] constant(0)\n  padded = {ty}[2,{m},{n}] pad(f, z), padding=0_0x0_0x0_{}\n  ROOT q = {ty}[2,{m},{n}] custom-call(padded, tau), custom_call_target=\"lapack_{p}orgqr_ffi\", backend_config={{}}\n}}\n",
                n - k
            );
            check(&text, &[random(t, &[2, m, k], 19)]);
        }
    }
}

fn s32s(a: &ArrayLiteral) -> Vec<i32> {
    a.to_vec::<i32>().expect("s32")
}

fn f32s(a: &ArrayLiteral) -> Vec<f32> {
    a.to_vec::<f32>().expect("f32")
}

#[test]
fn singular_matrices_follow_lapack() {
    // potrf stops at the first non-positive leading minor, stores it on the diagonal, leaves
    // everything after it and the other triangle as they were, and reports it in info.
    let text = lapack_text(
        "f32",
        "potrf",
        &["f32[2,3,3]".into()],
        "(f32[2,3,3], s32[2])",
        "uplo = 76 : ui8",
    );
    let m = parse_module(&text).unwrap();
    let a = [
        4.0, 9.0, 9.0, 2.0, 1.0, 9.0, 6.0, 5.0, 9.0, // fails at column 2: 1 - 1 = 0
        4.0, 9.0, 9.0, 2.0, 5.0, 9.0, 2.0, 1.0, 6.0, // positive definite
    ];
    let got = run_cpu(&m, &[array(ElementType::F32, &[2, 3, 3], |k| (a[k], 0.0))]);
    assert_eq!(s32s(&got[1]), vec![2, 0]);
    let l = f32s(&got[0]);
    assert_eq!(&l[..9], &[2.0, 9.0, 9.0, 1.0, 0.0, 9.0, 3.0, 5.0, 9.0]);
    // The second: L = [[2,0,0],[1,2,0],[1,0,sqrt(5)]], upper triangle untouched.
    assert_eq!(&l[9..17], &[2.0, 9.0, 9.0, 1.0, 2.0, 9.0, 1.0, 0.0]);
    assert!((l[17] - 5f32.sqrt()).abs() < 1e-6);

    // getrf: the first largest pivot, 1-based pivots, info at the first zero pivot (which is
    // neither swapped nor divided by).
    let text = lapack_text(
        "f32",
        "getrf",
        &["f32[2,3,3]".into()],
        "(f32[2,3,3], s32[2,3], s32[2])",
        "",
    );
    let m = parse_module(&text).unwrap();
    let a: [f32; 18] = [
        0.0, 0.0, 1.0, 0.0, 0.0, 2.0, 0.0, 0.0, -3.0, // zero first column
        1.0, 2.0, 0.0, -4.0, 4.0, 1.0, 4.0, 0.0, 2.0, // ties: the first largest wins
    ];
    let got = run_cpu(
        &m,
        &[array(ElementType::F32, &[2, 3, 3], |k| (a[k] as f64, 0.0))],
    );
    assert_eq!(s32s(&got[2]), vec![1, 0]);
    assert_eq!(s32s(&got[1]), vec![1, 2, 3, 2, 3, 3]);
    let lu = f32s(&got[0]);
    assert_eq!(&lu[..9], &a[..9]);
    // Rows swapped 0<->1: [-4,4,1]; l = [-0.25, -1]; then row 2 - (-1)*row0 -> [0,4,3],
    // row 1 - (-0.25)*row0 -> [0,3,0.25]; pivot 4 at row 2 (swap), l = 0.75, u22 = 0.25 - 2.25.
    assert_eq!(
        &lu[9..],
        &[-4.0, 4.0, 1.0, -1.0, 4.0, 3.0, -0.25, 0.75, -2.0]
    );
}

#[test]
fn host_calls_run_inside_loops() {
    // Three triangular solves with the same matrix in a while loop, against the evaluator.
    let text = r#"
HloModule w
cond {
  cs = (s32[], f64[2,3,3], f64[2,3,2]) parameter(0)
  ci = s32[] get-tuple-element(cs), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(ci, n), direction=LT
}
body {
  s = (s32[], f64[2,3,3], f64[2,3,2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  a = f64[2,3,3] get-tuple-element(s), index=1
  b = f64[2,3,2] get-tuple-element(s), index=2
  x = f64[2,3,2] triangular-solve(a, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
  ROOT t = (s32[], f64[2,3,3], f64[2,3,2]) tuple(j, a, x)
}
ENTRY main {
  a0 = f64[2,3,3] parameter(0)
  b0 = f64[2,3,2] parameter(1)
  z = s32[] constant(0)
  t0 = (s32[], f64[2,3,3], f64[2,3,2]) tuple(z, a0, b0)
  w = (s32[], f64[2,3,3], f64[2,3,2]) while(t0), condition=cond, body=body
  ROOT r = f64[2,3,2] get-tuple-element(w), index=2
}
"#;
    check(
        text,
        &[
            dominant(ElementType::F64, &[2, 3, 3], 21),
            random(ElementType::F64, &[2, 3, 2], 22),
        ],
    );
}

#[test]
fn aot_refuses_modules_that_need_the_runtime_library() {
    let text = "HloModule f\nENTRY main {\n  x = f32[8] parameter(0)\n  ROOT spectrum.3 = c64[5] fft(x), fft_type=RFFT, fft_length={8}\n}\n";
    let m = parse_module(text).unwrap();
    let e = compile_aot(&m, &CpuOptions::default(), "model").expect_err("needs the runtime");
    assert_eq!(e.instruction, "spectrum.3");
    assert_eq!(e.opcode, "fft");
    assert!(
        e.message.contains(
            "fft needs the Axle runtime library, which ahead-of-time objects do not include"
        ),
        "{e}"
    );
    // Custom calls name their target.
    let text = lapack_text(
        "f64",
        "potrf",
        &["f64[3,3]".into()],
        "(f64[3,3], s32[])",
        "uplo = 85 : ui8",
    );
    let m = parse_module(&text).unwrap();
    let e = compile_aot(&m, &CpuOptions::default(), "model").expect_err("needs the runtime");
    assert_eq!(e.instruction, "r");
    assert!(
        e.message
            .contains("the custom call lapack_dpotrf_ffi needs the Axle runtime library"),
        "{e}"
    );
    // The JIT runs the same module.
    let Literal::Array(mut a) = positive_definite(ElementType::F64, 1, 3, 1) else {
        unreachable!()
    };
    a.shape = ArrayShape::new(ElementType::F64, &[3, 3]);
    let got = run_cpu(&m, &[Literal::Array(a)]);
    assert_eq!(s32s(&got[1]), vec![0]);
}

#[test]
fn what_the_runtime_library_does_not_do_is_an_error_naming_the_instruction() {
    let cases = [
        // An eigen/SVD routine.
        (
            lapack_text("f32", "gesdd", &["f32[3,3]".into()], "(f32[3], s32[])", ""),
            "not supported",
        ),
        // Complex QR.
        (
            lapack_text(
                "c64",
                "geqrf",
                &["c64[3,3]".into()],
                "(c64[3,3], c64[3])",
                "",
            ),
            "complex QR",
        ),
        // potrf without uplo.
        (
            lapack_text(
                "f32",
                "potrf",
                &["f32[3,3]".into()],
                "(f32[3,3], s32[])",
                "",
            ),
            "uplo",
        ),
        // A target whose type letter does not match the operand.
        (
            lapack_text(
                "f32",
                "getrf",
                &["f64[3,3]".into()],
                "(f64[3,3], s32[3], s32[])",
                "",
            ),
            "takes f32 operands",
        ),
        // A result shape that does not match.
        (
            lapack_text(
                "f32",
                "getrf",
                &["f32[3,3]".into()],
                "(f32[3,3], s32[2], s32[])",
                "",
            ),
            "result shape",
        ),
    ];
    for (text, needle) in cases {
        let m = parse_module(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let e = compile(&m, &CpuOptions::default()).expect_err("must not compile");
        assert_eq!(e.instruction, "r", "{e}");
        assert!(e.message.contains(needle), "{text}: {e}");
    }
}

/// XLA's own outputs of the `fft_all` reference case (RFFT, FFT, IFFT and IRFFT of one input),
/// with its `convert` to `c64` done on the host so the case does not depend on complex kernels.
#[test]
fn ffts_give_xla_outputs() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("analysis/tests/xla");
    let x = axle::ir::npy::read_npy(dir.join("fft_all.in0.npy")).expect("input");
    let re = x.to_vec::<f32>().expect("f32");
    let c = array(ElementType::C64, &x.shape.dims, |k| (re[k] as f64, 0.0));
    let text = r#"
HloModule fft_all_host_convert
ENTRY main {
  x = f32[2,4,6] parameter(0)
  c = c64[2,4,6] parameter(1)
  r = c64[2,4,4] fft(x), fft_type=RFFT, fft_length={4,6}
  f = c64[2,4,6] fft(c), fft_type=FFT, fft_length={6}
  i = c64[2,4,6] fft(f), fft_type=IFFT, fft_length={4,6}
  b = f32[2,4,6] fft(r), fft_type=IRFFT, fft_length={4,6}
  ROOT t = (c64[2,4,4], c64[2,4,6], c64[2,4,6], f32[2,4,6]) tuple(r, f, i, b)
}
"#;
    let m = parse_module(text).unwrap();
    let got = run_cpu(&m, &[Literal::Array(x), c]);
    for (k, g) in got.iter().enumerate() {
        let want =
            axle::ir::npy::read_npy(dir.join(format!("fft_all.out{k}.npy"))).expect("output");
        let tol = Tolerance::Close {
            rtol: 1e-5,
            atol: 1e-5,
        };
        compare_arrays(&want, g, tol).unwrap_or_else(|e| panic!("out{k}: {e}"));
    }
}
