//! The CPU backend's runtime library (host calls): `fft`, `cholesky`, `triangular-solve` and
//! JAX's LAPACK custom calls against the reference evaluator over their attributes and element
//! types (`syevd`/`heevd`, `gesdd`, complex QR, `gtsv`, `ormqr`/`unmqr`, `sytrd`/`hetrd`,
//! `gehrd`, the perturbed tridiagonal solve, `gees` and `geev` against their definitions, on
//! both),
//! LAPACK's conventions on singular matrices (`info`, pivots, the untouched triangle),
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
    for ty in ["f32", "f64", "c64", "c128"] {
        let t = ElementType::from_name(ty).unwrap();
        let p = prefix(ty);
        let q = if t.is_complex() { "ungqr" } else { "orgqr" };
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
                "HloModule q\nENTRY main {{\n  a = {ty}[2,{m},{k}] parameter(0)\n  g = ({ty}[2,{m},{k}], {ty}[2,{k}]) custom-call(a), custom_call_target=\"lapack_{p}geqrf_ffi\", backend_config={{}}\n  f = {ty}[2,{m},{k}] get-tuple-element(g), index=0\n  tau = {ty}[2,{k}] get-tuple-element(g), index=1\n  z = {ty}[] constant({zero})\n  padded = {ty}[2,{m},{n}] pad(f, z), padding=0_0x0_0x0_{}\n  ROOT q = {ty}[2,{m},{n}] custom-call(padded, tau), custom_call_target=\"lapack_{p}{q}_ffi\", backend_config={{}}\n}}\n",
                n - k,
                zero = if t.is_complex() { "(0, 0)" } else { "0" },
            );
            check(&text, &[random(t, &[2, m, k], 19)]);
        }
    }
}

/// The values of a real array as `f64`.
fn reals(a: &ArrayLiteral) -> Vec<f64> {
    match a.ty() {
        ElementType::F32 => f32s(a).into_iter().map(f64::from).collect(),
        _ => a.to_vec::<f64>().expect("f64"),
    }
}

/// Row-major `batch` matrices of `rows x cols` from a function of `(batch, row, col)`.
fn matrices(
    ty: ElementType,
    batch: usize,
    rows: usize,
    cols: usize,
    f: impl Fn(usize, usize, usize) -> f64,
) -> Literal {
    array(ty, &[batch as i64, rows as i64, cols as i64], |k| {
        (f(k / (rows * cols), k / cols % rows, k % cols), 0.0)
    })
}

/// The test matrices of `syevd` and `gesdd`: random, of rank one (repeated zero singular
/// values), Hilbert's (ill-conditioned), one with a repeated eigenvalue, and all zeros.
/// A matrix entry as a function of `(batch, row, col)`.
type Entry = Box<dyn Fn(usize, usize, usize) -> f64>;

fn linalg_cases(cols: usize) -> Vec<(&'static str, Entry)> {
    vec![
        (
            "random",
            Box::new(move |b, i, j| noise(23 + b as u64, (i * cols + j) as u64)),
        ),
        (
            "rank one",
            Box::new(|b, i, j| (i as f64 + 1.0) * (j as f64 - 1.5 + b as f64)),
        ),
        ("hilbert", Box::new(|_, i, j| 1.0 / (i + j + 1) as f64)),
        // I plus 2/3 of the matrix of ones: the eigenvalue 1 repeated.
        (
            "repeated",
            Box::new(|_, i, j| if i == j { 5.0 / 3.0 } else { 2.0 / 3.0 }),
        ),
        ("zeros", Box::new(|_, _, _| 0.0)),
    ]
}

/// The tolerance of reconstructions and orthogonality, relative to the matrix's largest entry
/// (Jacobi's methods are accurate to a few ulps of the norm).
fn eps_of(ty: ElementType, n: usize) -> f64 {
    let eps = if matches!(ty, ElementType::F32 | ElementType::C64) {
        f32::EPSILON as f64
    } else {
        f64::EPSILON
    };
    50.0 * eps * n.max(1) as f64
}

/// `syevd` on the evaluator and the `cpu` backend over sizes (1x1, batched), both triangles and
/// both modes. Eigenvectors are defined only up to sign (and rotation within a repeated
/// eigenvalue), so this checks what is defined, never LAPACK's or XLA's bits:
/// `A = V diag(w) V^T` from the triangle asked for, `V^T V = I`, `w` ascending, `info = 0`, the
/// values of `mode = N` those of `mode = V`, and the known values of the rank-one case.
#[test]
fn syevd_decomposes_symmetric_matrices() {
    for ty in ["f32", "f64"] {
        let t = ElementType::from_name(ty).unwrap();
        for (batch, n) in [(1, 1), (1, 5), (3, 4)] {
            for (name, f) in linalg_cases(n) {
                let a = matrices(t, batch, n, n, &f);
                let av = reals(match &a {
                    Literal::Array(x) => x,
                    _ => unreachable!(),
                });
                for (uplo, lower) in [(76, true), (85, false)] {
                    let run = |mode: u8, backend: &str| {
                        let text = lapack_text(
                            ty,
                            "syevd",
                            &[format!("{ty}[{batch},{n},{n}]")],
                            &format!("({ty}[{batch},{n},{n}], {ty}[{batch},{n}], s32[{batch}])"),
                            &format!("mode = {mode} : ui8, uplo = {uplo} : ui8"),
                        );
                        let m = parse_module(&text).unwrap();
                        if backend == "cpu" {
                            run_cpu(&m, std::slice::from_ref(&a))
                        } else {
                            evaluate(&m, std::slice::from_ref(&a))
                        }
                    };
                    for backend in ["interpreter", "cpu"] {
                        let what = format!("{ty} {batch}x{n}x{n} {name} uplo {uplo} on {backend}");
                        let out = run(86, backend);
                        let (v, w) = (reals(&out[0]), reals(&out[1]));
                        assert_eq!(s32s(&out[2]), vec![0; batch], "{what}");
                        let values_n = reals(&run(78, backend)[1]);
                        let scale = av.iter().fold(1e-30f64, |m, x| m.max(x.abs()));
                        let tol = eps_of(t, n) * scale;
                        for b in 0..batch {
                            let (v, w, x) = (
                                &v[b * n * n..(b + 1) * n * n],
                                &w[b * n..(b + 1) * n],
                                &av[b * n * n..(b + 1) * n * n],
                            );
                            assert!(w.windows(2).all(|p| p[0] <= p[1]), "{what}: {w:?}");
                            for i in 0..n {
                                for j in 0..n {
                                    let (r, c) = if (i >= j) == lower { (i, j) } else { (j, i) };
                                    let rec: f64 =
                                        (0..n).map(|k| v[i * n + k] * w[k] * v[j * n + k]).sum();
                                    assert!(
                                        (rec - x[r * n + c]).abs() <= tol,
                                        "{what}: A({i},{j})"
                                    );
                                    let vtv: f64 =
                                        (0..n).map(|k| v[k * n + i] * v[k * n + j]).sum();
                                    assert!(
                                        (vtv - f64::from(i == j)).abs() <= eps_of(t, n),
                                        "{what}: V^T V"
                                    );
                                }
                            }
                            for k in 0..n {
                                assert!(
                                    (values_n[b * n + k] - w[k]).abs() <= tol,
                                    "{what}: mode N"
                                );
                            }
                        }
                        if name == "zeros" {
                            assert!(w.iter().all(|&x| x == 0.0), "{what}");
                        }
                    }
                }
            }
        }
    }
}

/// `gesdd` on the evaluator and the `cpu` backend over tall, wide, square, 1x1 and batched
/// matrices in its three modes. Singular vectors are defined only up to sign (and rotation
/// within a repeated value), so this checks what is defined: `A = U diag(s) V^T`, orthonormal
/// columns of `U` and rows of `V^T` (square ones for `mode = A`), `s` descending and
/// non-negative, `info = 0`, the values of `mode = N` those of the others, and the known values
/// of the rank-one and zero cases.
#[test]
fn gesdd_decomposes_matrices() {
    for ty in ["f32", "f64"] {
        let t = ElementType::from_name(ty).unwrap();
        for (batch, m, n) in [(1, 1, 1), (1, 5, 3), (2, 3, 5), (2, 4, 4)] {
            let k = m.min(n);
            for (name, f) in linalg_cases(n) {
                let a = matrices(t, batch, m, n, &f);
                let av = reals(match &a {
                    Literal::Array(x) => x,
                    _ => unreachable!(),
                });
                let scale = av.iter().fold(1e-30f64, |s, x| s.max(x.abs()));
                let tol = eps_of(t, m.max(n)) * scale;
                for backend in ["interpreter", "cpu"] {
                    let mut values = Vec::new();
                    for mode in [65u8, 83, 78] {
                        let (uc, vr) = if mode == 65 { (m, n) } else { (k, k) };
                        let text = lapack_text(
                            ty,
                            "gesdd",
                            &[format!("{ty}[{batch},{m},{n}]")],
                            &format!("({ty}[{batch},{m},{n}], {ty}[{batch},{k}], {ty}[{batch},{m},{uc}], {ty}[{batch},{vr},{n}], s32[{batch}])"),
                            &format!("mode = {mode} : ui8"),
                        );
                        let mo = parse_module(&text).unwrap();
                        let out = if backend == "cpu" {
                            run_cpu(&mo, std::slice::from_ref(&a))
                        } else {
                            evaluate(&mo, std::slice::from_ref(&a))
                        };
                        let what = format!("{ty} {batch}x{m}x{n} {name} mode {mode} on {backend}");
                        assert_eq!(s32s(&out[4]), vec![0; batch], "{what}");
                        let (s, u, vt) = (reals(&out[1]), reals(&out[2]), reals(&out[3]));
                        values.push(s.clone());
                        assert!(s.iter().all(|&x| x >= 0.0), "{what}: {s:?}");
                        for b in 0..batch {
                            let s = &s[b * k..(b + 1) * k];
                            assert!(s.windows(2).all(|p| p[0] >= p[1]), "{what}: {s:?}");
                            if name == "rank one" {
                                // |x| |y| for the outer product x y^T, then zeros.
                                let x: f64 =
                                    (0..m).map(|i| ((i + 1) as f64).powi(2)).sum::<f64>().sqrt();
                                let y: f64 = (0..n)
                                    .map(|j| (j as f64 - 1.5 + b as f64).powi(2))
                                    .sum::<f64>()
                                    .sqrt();
                                assert!((s[0] - x * y).abs() <= tol, "{what}: {s:?}");
                                assert!(s[1..].iter().all(|&v| v <= tol), "{what}: {s:?}");
                            }
                            if mode == 78 {
                                continue;
                            }
                            let u = &u[b * m * uc..(b + 1) * m * uc];
                            let vt = &vt[b * vr * n..(b + 1) * vr * n];
                            let x = &av[b * m * n..(b + 1) * m * n];
                            for i in 0..m {
                                for j in 0..n {
                                    let rec: f64 =
                                        (0..k).map(|l| u[i * uc + l] * s[l] * vt[l * n + j]).sum();
                                    assert!(
                                        (rec - x[i * n + j]).abs() <= tol,
                                        "{what}: A({i},{j})"
                                    );
                                }
                            }
                            let e = eps_of(t, m.max(n));
                            for i in 0..uc {
                                for j in 0..uc {
                                    let d: f64 =
                                        (0..m).map(|r| u[r * uc + i] * u[r * uc + j]).sum();
                                    assert!((d - f64::from(i == j)).abs() <= e, "{what}: U^T U");
                                }
                            }
                            for i in 0..vr {
                                for j in 0..vr {
                                    let d: f64 =
                                        (0..n).map(|c| vt[i * n + c] * vt[j * n + c]).sum();
                                    assert!((d - f64::from(i == j)).abs() <= e, "{what}: V^T V");
                                }
                            }
                        }
                    }
                    for other in &values[1..] {
                        for (x, y) in values[0].iter().zip(other) {
                            assert!(
                                (x - y).abs() <= tol,
                                "{ty} {m}x{n} {name} on {backend}: modes disagree"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The custom calls as JAX 0.10.2 emits them for `jnp.linalg.eigh` and `jnp.linalg.svd` (layout
/// constraints, aliasing, frontend attributes and all), on both backends: the eigenvalues of a
/// symmetric matrix with the known spectrum `{1, 1, 3}` (a repeated value), and the singular
/// values of a diagonal matrix.
#[test]
fn jax_emitted_eigh_and_svd_compile() {
    let text = r#"HloModule jit_eigh
ENTRY main {
  a = f32[2,3,3]{2,1,0} parameter(0)
  eigh = (f32[2,3,3]{1,2,0}, f32[2,3]{1,0}, s32[2]{0}) custom-call(a), custom_call_target="lapack_ssyevd_ffi", operand_layout_constraints={f32[2,3,3]{1,2,0}}, output_to_operand_aliasing={{0}: (0, {})}, api_version=API_VERSION_TYPED_FFI, frontend_attributes={num_batch_dims="1"}, backend_config={mode = 86 : ui8, uplo = 76 : ui8}
  ROOT w = f32[2,3]{1,0} get-tuple-element(eigh), index=1
}
"#;
    // I plus 2/3 of the matrix of ones: eigenvalues 1, 1 and 3.
    let a = matrices(ElementType::F32, 2, 3, 3, |_, i, j| {
        if i == j {
            5.0 / 3.0
        } else {
            2.0 / 3.0
        }
    });
    let m = parse_module(text).unwrap();
    for got in [
        evaluate(&m, std::slice::from_ref(&a)),
        run_cpu(&m, std::slice::from_ref(&a)),
    ] {
        let w = reals(&got[0]);
        for (x, want) in w.iter().zip([1.0, 1.0, 3.0, 1.0, 1.0, 3.0]) {
            assert!((x - want).abs() < 1e-5, "{w:?}");
        }
    }
    let text = r#"HloModule jit_svd
ENTRY main {
  a = f64[3,5]{1,0} parameter(0)
  svd = (f64[3,5]{0,1}, f64[3]{0}, f64[3,3]{0,1}, f64[5,5]{0,1}, s32[]) custom-call(a), custom_call_target="lapack_dgesdd_ffi", operand_layout_constraints={f64[3,5]{0,1}}, output_to_operand_aliasing={{0}: (0, {})}, api_version=API_VERSION_TYPED_FFI, frontend_attributes={num_batch_dims="0"}, backend_config={mode = 65 : ui8}
  ROOT s = f64[3]{0} get-tuple-element(svd), index=1
}
"#;
    let a = matrices(ElementType::F64, 1, 3, 5, |_, i, j| {
        if i == j {
            [2.0, -7.0, 0.5][i]
        } else {
            0.0
        }
    });
    let a = match a {
        Literal::Array(x) => Literal::Array(ArrayLiteral {
            shape: ArrayShape::new(ElementType::F64, &[3, 5]),
            data: x.data,
        }),
        _ => unreachable!(),
    };
    let m = parse_module(text).unwrap();
    for got in [
        evaluate(&m, std::slice::from_ref(&a)),
        run_cpu(&m, std::slice::from_ref(&a)),
    ] {
        let s = reals(&got[0]);
        for (x, want) in s.iter().zip([7.0, 2.0, 0.5]) {
            assert!((x - want).abs() < 1e-14, "{s:?}");
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
        // The general eigenproblem with real eigenvectors, and without compute_left.
        (
            lapack_text(
                "f32",
                "geev",
                &["f32[3,3]".into()],
                "(f32[3], f32[3], f32[3,3], f32[3,3], s32[])",
                "compute_left = 78 : ui8, compute_right = 86 : ui8",
            ),
            "result shape",
        ),
        (
            lapack_text(
                "c64",
                "geev",
                &["c64[3,3]".into()],
                "(c64[3], c64[3,3], c64[3,3], s32[])",
                "compute_right = 86 : ui8",
            ),
            "compute_left = V or N",
        ),
        // Complex SVD with complex singular values.
        (
            lapack_text(
                "c64",
                "gesdd",
                &["c64[3,3]".into()],
                "(c64[3,3], c64[3], c64[3,3], c64[3,3], s32[])",
                "mode = 65 : ui8",
            ),
            "result shape",
        ),
        // The Hermitian routine's name on a real type, the real one's on a complex type.
        (
            lapack_text(
                "f32",
                "heevd",
                &["f32[3,3]".into()],
                "(f32[3,3], f32[3], s32[])",
                "mode = 86 : ui8, uplo = 76 : ui8",
            ),
            "takes complex operands",
        ),
        (
            lapack_text(
                "c128",
                "orgqr",
                &["c128[3,3]".into(), "c128[3]".into()],
                "c128[3,3]",
                "",
            ),
            "the complex routine is ungqr",
        ),
        // The Schur decomposition with sorted eigenvalues (JAX never asks for it).
        (
            lapack_text(
                "f32",
                "gees",
                &["f32[4,4]".into()],
                "(f32[4,4], f32[4,4], f32[4], f32[4], s32[], s32[])",
                "mode = 86 : ui8, sort = 83 : ui8",
            ),
            "sort = S",
        ),
        // A complex Schur decomposition with real and imaginary parts.
        (
            lapack_text(
                "c128",
                "gees",
                &["c128[4,4]".into()],
                "(c128[4,4], c128[4,4], c128[4], c128[4], s32[], s32[])",
                "mode = 86 : ui8, sort = 78 : ui8",
            ),
            "result shape",
        ),
        // sytrd's e of the wrong length; hetrd on a real type.
        (
            lapack_text(
                "f32",
                "sytrd",
                &["f32[4,4]".into()],
                "(f32[4,4], f32[4], f32[4], f32[3], s32[])",
                "uplo = 76 : ui8",
            ),
            "result shape",
        ),
        (
            lapack_text(
                "f64",
                "hetrd",
                &["f64[4,4]".into()],
                "(f64[4,4], f64[4], f64[3], f64[3], s32[])",
                "uplo = 76 : ui8",
            ),
            "the real routine is sytrd",
        ),
        // ormqr without its side, and with c of the wrong height.
        (
            lapack_text(
                "f32",
                "ormqr",
                &["f32[4,3]".into(), "f32[3]".into(), "f32[4,2]".into()],
                "f32[4,2]",
                "transpose = false",
            ),
            "left = true or false",
        ),
        (
            lapack_text(
                "c64",
                "unmqr",
                &["c64[4,3]".into(), "c64[3]".into(), "c64[3,2]".into()],
                "c64[3,2]",
                "left = true, transpose = true",
            ),
            "m rows (left)",
        ),
        // gehrd's range outside the matrix.
        (
            lapack_text(
                "f64",
                "gehrd",
                &["f64[4,4]".into()],
                "(f64[4,4], f64[3], s32[])",
                "high = 5 : i32, low = 1 : i32",
            ),
            "1 <= low <= high <= n",
        ),
        // The perturbed tridiagonal solve with diagonals that do not match b.
        (
            "HloModule l\nENTRY main {\n  p0 = f32[4] parameter(0)\n  p1 = f32[4] parameter(1)\n  p2 = f32[3] parameter(2)\n  p3 = f32[4,1] parameter(3)\n  ROOT r = f32[4,1] custom-call(p0, p1, p2, p3), custom_call_target=\"tridiagonal_solve_perturbed_ffi\", api_version=API_VERSION_TYPED_FFI, backend_config={}\n}\n".to_string(),
            "diagonals",
        ),
        // gtsv diagonals that do not match the right-hand sides.
        (
            lapack_text(
                "f64",
                "gtsv",
                &[
                    "f64[4]".into(),
                    "f64[4]".into(),
                    "f64[3]".into(),
                    "f64[4,2]".into(),
                ],
                "(f64[4], f64[4], f64[3], f64[4,2], s32[])",
                "",
            ),
            "diagonals",
        ),
        // syevd without mode.
        (
            lapack_text(
                "f64",
                "syevd",
                &["f64[3,3]".into()],
                "(f64[3,3], f64[3], s32[])",
                "uplo = 76 : ui8",
            ),
            "mode",
        ),
        // Thin U and V^T where the mode asks for full ones.
        (
            lapack_text(
                "f32",
                "gesdd",
                &["f32[4,3]".into()],
                "(f32[4,3], f32[3], f32[4,3], f32[3,3], s32[])",
                "mode = 65 : ui8",
            ),
            "result shape",
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

/// Complex values as `(re, im)` pairs (real arrays: zero imaginary parts).
fn cplx(a: &ArrayLiteral) -> Vec<(f64, f64)> {
    match a.ty() {
        ElementType::C64 => f32s_raw(&a.data)
            .chunks_exact(2)
            .map(|p| (p[0] as f64, p[1] as f64))
            .collect(),
        ElementType::C128 => a
            .data
            .chunks_exact(16)
            .map(|b| {
                let f = |x: &[u8]| f64::from_le_bytes(x.try_into().unwrap());
                (f(&b[..8]), f(&b[8..]))
            })
            .collect(),
        _ => reals(a).into_iter().map(|x| (x, 0.0)).collect(),
    }
}

fn f32s_raw(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|x| f32::from_le_bytes(x.try_into().unwrap()))
        .collect()
}

fn cmul(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

fn conj(a: (f64, f64)) -> (f64, f64) {
    (a.0, -a.1)
}

fn cabs(a: (f64, f64)) -> f64 {
    a.0.hypot(a.1)
}

fn csub(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    (a.0 - b.0, a.1 - b.1)
}

/// `sum_l f(l)` of complex terms.
fn csum(r: std::ops::Range<usize>, f: impl Fn(usize) -> (f64, f64)) -> (f64, f64) {
    r.map(f).fold((0.0, 0.0), |s, x| (s.0 + x.0, s.1 + x.1))
}

fn run_on(backend: &str, text: &str, args: &[Literal]) -> Vec<ArrayLiteral> {
    let m = parse_module(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    if backend == "cpu" {
        run_cpu(&m, args)
    } else {
        evaluate(&m, args)
    }
}

/// The complex test matrices: random, of rank one (`x y^H`), and all zeros.
fn complex_cases(
    ty: ElementType,
    batch: usize,
    m: usize,
    n: usize,
) -> Vec<(&'static str, Literal)> {
    let dims = [batch as i64, m as i64, n as i64];
    vec![
        ("random", random(ty, &dims, 31)),
        (
            "rank one",
            array(ty, &dims, move |k| {
                let (b, i, j) = (k / (m * n), k / n % m, k % n);
                let x = (i as f64 + 1.0, 0.5 - b as f64);
                let y = (j as f64 - 1.5, 1.0 + j as f64);
                cmul(x, conj(y))
            }),
        ),
        ("zeros", array(ty, &dims, |_| (0.0, 0.0))),
    ]
}

/// Complex Householder QR (`?geqrf`, then `?ungqr` for the reduced and the complete `Q`) on
/// both backends, tall, square and wide, batched: `A = Q R` with `R` upper triangular (real
/// diagonal, as `?larfg` makes it) and `Q^H Q = I`; what is defined, never LAPACK's bits.
#[test]
fn complex_qr_factors_matrices() {
    for ty in ["c64", "c128"] {
        let t = ElementType::from_name(ty).unwrap();
        let p = prefix(ty);
        for (batch, m, n) in [(1, 1, 1), (2, 5, 3), (1, 4, 4), (2, 3, 5)] {
            let k = m.min(n);
            for (name, a) in complex_cases(t, batch, m, n) {
                let av = cplx(match &a {
                    Literal::Array(x) => x,
                    _ => unreachable!(),
                });
                let scale = av.iter().fold(1e-30f64, |s, &x| s.max(cabs(x)));
                let tol = eps_of(t, m.max(n)) * scale;
                // Q is m x qc: the reduced (qc = k) and the complete (qc = m, from the factor
                // padded to m columns when n < m) one.
                for qc in [k, m] {
                    let text = format!(
                        "HloModule q\nENTRY main {{\n  a = {ty}[{batch},{m},{n}] parameter(0)\n  g = ({ty}[{batch},{m},{n}], {ty}[{batch},{k}]) custom-call(a), custom_call_target=\"lapack_{p}geqrf_ffi\", api_version=API_VERSION_TYPED_FFI, backend_config={{}}\n  f = {ty}[{batch},{m},{n}] get-tuple-element(g), index=0\n  tau = {ty}[{batch},{k}] get-tuple-element(g), index=1\n  fk = {ty}[{batch},{m},{k}] slice(f), slice={{[0:{batch}], [0:{m}], [0:{k}]}}\n  z = {ty}[] constant({zero})\n  padded = {ty}[{batch},{m},{qc}] pad(fk, z), padding=0_0x0_0x0_{}\n  q = {ty}[{batch},{m},{qc}] custom-call(padded, tau), custom_call_target=\"lapack_{p}ungqr_ffi\", api_version=API_VERSION_TYPED_FFI, backend_config={{}}\n  ROOT r = ({ty}[{batch},{m},{n}], {ty}[{batch},{m},{qc}]) tuple(f, q)\n}}\n",
                        qc - k,
                        zero = if t.is_complex() { "(0, 0)" } else { "0" },
                    );
                    for backend in ["interpreter", "cpu"] {
                        let what = format!("{ty} {batch}x{m}x{n} {name} Q {m}x{qc} on {backend}");
                        let out = run_on(backend, &text, std::slice::from_ref(&a));
                        let (f, q) = (cplx(&out[0]), cplx(&out[1]));
                        for b in 0..batch {
                            let f = &f[b * m * n..(b + 1) * m * n];
                            let q = &q[b * m * qc..(b + 1) * m * qc];
                            let x = &av[b * m * n..(b + 1) * m * n];
                            let r =
                                |i: usize, j: usize| if i <= j { f[i * n + j] } else { (0.0, 0.0) };
                            for i in 0..k {
                                assert_eq!(f[i * n + i].1, 0.0, "{what}: R's diagonal");
                            }
                            for i in 0..m {
                                for j in 0..n {
                                    let rec = csum(0..k, |l| cmul(q[i * qc + l], r(l, j)));
                                    assert!(
                                        cabs(csub(rec, x[i * n + j])) <= tol,
                                        "{what}: A({i},{j})"
                                    );
                                }
                            }
                            for i in 0..qc {
                                for j in 0..qc {
                                    let d =
                                        csum(0..m, |l| cmul(conj(q[l * qc + i]), q[l * qc + j]));
                                    let want = (f64::from(i == j), 0.0);
                                    assert!(cabs(csub(d, want)) <= eps_of(t, m), "{what}: Q^H Q");
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `?gtsv` on both backends for every type, batched, one and several right-hand sides,
/// orders 1, 2 and 6, with and without interchanges: `A x = b` (JAX's convention: `dl[0]` and
/// `du[n-1]` not read), `info = 0`; a singular system reports LAPACK's `info` (the first zero
/// pivot), and a NaN gives NaNs, not a panic.
#[test]
fn gtsv_solves_tridiagonal_systems() {
    for ty in ["f32", "f64", "c64", "c128"] {
        let t = ElementType::from_name(ty).unwrap();
        for (batch, n, nrhs) in [(1, 1, 1), (2, 2, 3), (3, 6, 1), (2, 6, 4)] {
            let text = lapack_text(
                ty,
                "gtsv",
                &[
                    format!("{ty}[{batch},{n}]"),
                    format!("{ty}[{batch},{n}]"),
                    format!("{ty}[{batch},{n}]"),
                    format!("{ty}[{batch},{n},{nrhs}]"),
                ],
                &format!("({ty}[{batch},{n}], {ty}[{batch},{n}], {ty}[{batch},{n}], {ty}[{batch},{n},{nrhs}], s32[{batch}])"),
                "",
            );
            // Small diagonals in odd rows force interchanges; dl[0] and du[n-1] are garbage.
            let dl = array(t, &[batch as i64, n as i64], |k| {
                if k % n == 0 {
                    (1e30, 3.0)
                } else {
                    (noise(41, k as u64) * 4.0, 1.0)
                }
            });
            let d = array(t, &[batch as i64, n as i64], |k| {
                if k % 2 == 1 {
                    (1e-3, 0.0)
                } else {
                    (2.0 + noise(42, k as u64), -0.5)
                }
            });
            let du = array(t, &[batch as i64, n as i64], |k| {
                if k % n == n - 1 {
                    (-1e30, 0.0)
                } else {
                    (noise(43, k as u64), 0.25)
                }
            });
            let b = random(t, &[batch as i64, n as i64, nrhs as i64], 44);
            let args = [dl, d, du, b];
            let vals: Vec<Vec<(f64, f64)>> = args
                .iter()
                .map(|a| {
                    cplx(match a {
                        Literal::Array(x) => x,
                        _ => unreachable!(),
                    })
                })
                .collect();
            for backend in ["interpreter", "cpu"] {
                let what = format!("{ty} {batch}x{n}x{nrhs} on {backend}");
                let out = run_on(backend, &text, &args);
                assert_eq!(s32s(&out[4]), vec![0; batch], "{what}");
                let x = cplx(&out[3]);
                for bt in 0..batch {
                    let at = |v: &Vec<(f64, f64)>, i: usize| v[bt * n + i];
                    let xv = |i: usize, j: usize| x[(bt * n + i) * nrhs + j];
                    for i in 0..n {
                        for j in 0..nrhs {
                            let mut s = cmul(at(&vals[1], i), xv(i, j));
                            let mut size = cabs(s);
                            if i > 0 {
                                let y = cmul(at(&vals[0], i), xv(i - 1, j));
                                size = size.max(cabs(y));
                                s = (s.0 + y.0, s.1 + y.1);
                            }
                            if i + 1 < n {
                                let y = cmul(at(&vals[2], i), xv(i + 1, j));
                                size = size.max(cabs(y));
                                s = (s.0 + y.0, s.1 + y.1);
                            }
                            let want = vals[3][(bt * n + i) * nrhs + j];
                            assert!(
                                cabs(csub(s, want)) <= eps_of(t, n) * size.max(1.0),
                                "{what}: row {i}"
                            );
                        }
                    }
                }
            }
        }
        // Singular: a zero first column stops at the first pivot; a NaN propagates.
        let text = lapack_text(
            ty,
            "gtsv",
            &[
                format!("{ty}[2,3]"),
                format!("{ty}[2,3]"),
                format!("{ty}[2,3]"),
                format!("{ty}[2,3,1]"),
            ],
            &format!("({ty}[2,3], {ty}[2,3], {ty}[2,3], {ty}[2,3,1], s32[2])"),
            "",
        );
        let args = [
            array(t, &[2, 3], |_| (0.0, 0.0)),
            array(t, &[2, 3], |k| {
                if k == 0 {
                    (0.0, 0.0)
                } else if k == 4 {
                    (f64::NAN, 0.0)
                } else {
                    (1.0, 0.0)
                }
            }),
            array(t, &[2, 3], |_| (1.0, 0.0)),
            array(t, &[2, 3, 1], |_| (1.0, 0.0)),
        ];
        for backend in ["interpreter", "cpu"] {
            let out = run_on(backend, &text, &args);
            let info = s32s(&out[4]);
            assert_eq!(info[0], 1, "{ty} on {backend}");
            assert!(
                cplx(&out[3])[3..].iter().all(|x| x.0.is_nan()),
                "{ty} on {backend}: NaN"
            );
        }
    }
}

/// `?heevd` on both backends: `A = V diag(w) V^H` from the triangle asked for, `V^H V = I`,
/// real ascending `w` (of the real type), `info = 0`, `mode = N`'s values those of `mode = V`;
/// the known values of the rank-one case (`|x|^2` and zeros for `x x^H`); NaN input gives NaN
/// values.
#[test]
fn heevd_decomposes_hermitian_matrices() {
    for ty in ["c64", "c128"] {
        let t = ElementType::from_name(ty).unwrap();
        let rt = if ty == "c64" { "f32" } else { "f64" };
        for (batch, n) in [(1, 1), (1, 5), (3, 4)] {
            let dims = [batch as i64, n as i64, n as i64];
            let cases = vec![
                ("random", random(t, &dims, 51)),
                (
                    "rank one",
                    array(t, &dims, move |k| {
                        let (i, j) = (k / n % n, k % n);
                        let x = |r: usize| (r as f64 + 1.0, 1.0 - r as f64);
                        cmul(x(i), conj(x(j)))
                    }),
                ),
                ("zeros", array(t, &dims, |_| (0.0, 0.0))),
            ];
            for (name, a) in cases {
                let av = cplx(match &a {
                    Literal::Array(x) => x,
                    _ => unreachable!(),
                });
                let scale = av.iter().fold(1e-30f64, |s, &x| s.max(cabs(x)));
                let tol = eps_of(t, n) * scale * n as f64;
                for (uplo, lower) in [(76, true), (85, false)] {
                    let text = |mode: u8| {
                        lapack_text(
                            ty,
                            "heevd",
                            &[format!("{ty}[{batch},{n},{n}]")],
                            &format!("({ty}[{batch},{n},{n}], {rt}[{batch},{n}], s32[{batch}])"),
                            &format!("mode = {mode} : ui8, uplo = {uplo} : ui8"),
                        )
                    };
                    for backend in ["interpreter", "cpu"] {
                        let what = format!("{ty} {batch}x{n} {name} uplo {uplo} on {backend}");
                        let out = run_on(backend, &text(86), std::slice::from_ref(&a));
                        assert_eq!(s32s(&out[2]), vec![0; batch], "{what}");
                        let (v, w) = (cplx(&out[0]), reals(&out[1]));
                        let wn = reals(&run_on(backend, &text(78), std::slice::from_ref(&a))[1]);
                        for b in 0..batch {
                            let v = &v[b * n * n..(b + 1) * n * n];
                            let w = &w[b * n..(b + 1) * n];
                            let x = &av[b * n * n..(b + 1) * n * n];
                            assert!(w.windows(2).all(|p| p[0] <= p[1]), "{what}: {w:?}");
                            for i in 0..n {
                                for j in 0..n {
                                    // The Hermitian matrix the triangle defines.
                                    let want = if i == j {
                                        (x[i * n + i].0, 0.0)
                                    } else if (i > j) == lower {
                                        x[i * n + j]
                                    } else {
                                        conj(x[j * n + i])
                                    };
                                    let rec = csum(0..n, |l| {
                                        let y = cmul(v[i * n + l], conj(v[j * n + l]));
                                        (y.0 * w[l], y.1 * w[l])
                                    });
                                    assert!(cabs(csub(rec, want)) <= tol, "{what}: A({i},{j})");
                                    let d = csum(0..n, |l| cmul(conj(v[l * n + i]), v[l * n + j]));
                                    assert!(
                                        cabs(csub(d, (f64::from(i == j), 0.0))) <= eps_of(t, n),
                                        "{what}: V^H V"
                                    );
                                }
                            }
                            for l in 0..n {
                                assert!((wn[b * n + l] - w[l]).abs() <= tol, "{what}: mode N");
                            }
                            if name == "rank one" {
                                let norm2: f64 = (0..n)
                                    .map(|r| cabs((r as f64 + 1.0, 1.0 - r as f64)).powi(2))
                                    .sum();
                                assert!((w[n - 1] - norm2).abs() <= tol, "{what}: {w:?}");
                                assert!(w[..n - 1].iter().all(|x| x.abs() <= tol), "{what}: {w:?}");
                            }
                            if name == "zeros" {
                                assert!(w.iter().all(|&x| x == 0.0), "{what}");
                            }
                        }
                    }
                }
            }
        }
        let text = lapack_text(
            ty,
            "heevd",
            &[format!("{ty}[2,2]")],
            &format!("({ty}[2,2], {rt}[2], s32[])"),
            "mode = 86 : ui8, uplo = 76 : ui8",
        );
        let a = array(t, &[2, 2], |k| {
            if k == 2 {
                (f64::NAN, 0.0)
            } else {
                (1.0, 0.0)
            }
        });
        for backend in ["interpreter", "cpu"] {
            let out = run_on(backend, &text, std::slice::from_ref(&a));
            assert!(
                reals(&out[1]).iter().all(|x| x.is_nan()),
                "{ty} on {backend}"
            );
        }
    }
}

/// Complex `?gesdd` (and `?gesvd`, thin) on both backends, tall, wide, square, 1x1 and
/// batched, in its three modes:
/// `A = U diag(s) V^H`, orthonormal columns of `U` and rows of `V^H` (square for `mode = A`),
/// `s` real (of the real type), descending and non-negative, `info = 0`, the values of
/// `mode = N` those of the others, and the known values of the rank-one (`|x| |y|`, then
/// zeros) and zero cases.
#[test]
fn complex_gesdd_decomposes_matrices() {
    for ty in ["c64", "c128"] {
        let t = ElementType::from_name(ty).unwrap();
        let rt = if ty == "c64" { "f32" } else { "f64" };
        for (batch, m, n) in [(1, 1, 1), (1, 5, 3), (2, 3, 5), (2, 4, 4)] {
            let k = m.min(n);
            for (name, a) in complex_cases(t, batch, m, n) {
                let av = cplx(match &a {
                    Literal::Array(x) => x,
                    _ => unreachable!(),
                });
                let scale = av.iter().fold(1e-30f64, |s, &x| s.max(cabs(x)));
                let tol = eps_of(t, m.max(n)) * scale * 2.0;
                for backend in ["interpreter", "cpu"] {
                    let mut values = Vec::new();
                    for mode in [65u8, 83, 78] {
                        let (uc, vr) = if mode == 65 { (m, n) } else { (k, k) };
                        let text = lapack_text(
                            ty,
                            // `?gesvd` (JAX's `SvdAlgorithm.QR`) for the thin decomposition.
                            if mode == 83 { "gesvd" } else { "gesdd" },
                            &[format!("{ty}[{batch},{m},{n}]")],
                            &format!("({ty}[{batch},{m},{n}], {rt}[{batch},{k}], {ty}[{batch},{m},{uc}], {ty}[{batch},{vr},{n}], s32[{batch}])"),
                            &format!("mode = {mode} : ui8"),
                        );
                        let out = run_on(backend, &text, std::slice::from_ref(&a));
                        let what = format!("{ty} {batch}x{m}x{n} {name} mode {mode} on {backend}");
                        assert_eq!(s32s(&out[4]), vec![0; batch], "{what}");
                        let (s, u, vt) = (reals(&out[1]), cplx(&out[2]), cplx(&out[3]));
                        values.push(s.clone());
                        assert!(s.iter().all(|&x| x >= 0.0), "{what}: {s:?}");
                        for b in 0..batch {
                            let s = &s[b * k..(b + 1) * k];
                            assert!(s.windows(2).all(|p| p[0] >= p[1]), "{what}: {s:?}");
                            if name == "rank one" {
                                let x: f64 = (0..m)
                                    .map(|i| cabs((i as f64 + 1.0, 0.5 - b as f64)).powi(2))
                                    .sum::<f64>()
                                    .sqrt();
                                let y: f64 = (0..n)
                                    .map(|j| cabs((j as f64 - 1.5, 1.0 + j as f64)).powi(2))
                                    .sum::<f64>()
                                    .sqrt();
                                assert!((s[0] - x * y).abs() <= tol, "{what}: {s:?}");
                                assert!(s[1..].iter().all(|&v| v <= tol), "{what}: {s:?}");
                            }
                            if name == "zeros" {
                                assert!(s.iter().all(|&v| v == 0.0), "{what}: {s:?}");
                            }
                            if mode == 78 {
                                continue;
                            }
                            let u = &u[b * m * uc..(b + 1) * m * uc];
                            let vt = &vt[b * vr * n..(b + 1) * vr * n];
                            let x = &av[b * m * n..(b + 1) * m * n];
                            for i in 0..m {
                                for j in 0..n {
                                    let rec = csum(0..k, |l| {
                                        let y = cmul(u[i * uc + l], vt[l * n + j]);
                                        (y.0 * s[l], y.1 * s[l])
                                    });
                                    assert!(
                                        cabs(csub(rec, x[i * n + j])) <= tol,
                                        "{what}: A({i},{j})"
                                    );
                                }
                            }
                            let e = eps_of(t, m.max(n));
                            for i in 0..uc {
                                for j in 0..uc {
                                    let d =
                                        csum(0..m, |r| cmul(conj(u[r * uc + i]), u[r * uc + j]));
                                    assert!(
                                        cabs(csub(d, (f64::from(i == j), 0.0))) <= e,
                                        "{what}: U^H U"
                                    );
                                }
                            }
                            for i in 0..vr {
                                for j in 0..vr {
                                    let d =
                                        csum(0..n, |c| cmul(vt[i * n + c], conj(vt[j * n + c])));
                                    assert!(
                                        cabs(csub(d, (f64::from(i == j), 0.0))) <= e,
                                        "{what}: V^H V"
                                    );
                                }
                            }
                        }
                    }
                    for other in &values[1..] {
                        for (x, y) in values[0].iter().zip(other) {
                            assert!(
                                (x - y).abs() <= tol,
                                "{ty} {m}x{n} {name} on {backend}: modes disagree"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The element `(i, j)` of `x`'s matrix `b` as a complex pair.
fn at3(x: &[(f64, f64)], b: usize, n: usize, i: usize, j: usize) -> (f64, f64) {
    x[(b * n + i) * n + j]
}

/// An elementary reflector `(v, tau)` over complex pairs.
type Reflector = (Vec<(f64, f64)>, (f64, f64));

/// `Q = H(0) H(1) ...` of the reflectors `H = I - tau v v^H` (each `v` of length `n`), as
/// LAPACK defines a product of elementary reflectors.
fn reflector_product(n: usize, refl: &[Reflector]) -> Vec<(f64, f64)> {
    let mut q: Vec<(f64, f64)> = (0..n * n)
        .map(|k| (f64::from(k / n == k % n), 0.0))
        .collect();
    for (v, tau) in refl {
        // Q := Q - tau (Q v) v^H
        for r in 0..n {
            let qv = csum(0..n, |c| cmul(q[r * n + c], v[c]));
            let t = cmul(*tau, qv);
            for c in 0..n {
                q[r * n + c] = csub(q[r * n + c], cmul(t, conj(v[c])));
            }
        }
    }
    q
}

/// `Q^H A Q` of `n`-by-`n` matrices.
fn similar(q: &[(f64, f64)], a: &[(f64, f64)], n: usize) -> Vec<(f64, f64)> {
    let aq: Vec<(f64, f64)> = (0..n * n)
        .map(|k| csum(0..n, |l| cmul(a[k / n * n + l], q[l * n + k % n])))
        .collect();
    (0..n * n)
        .map(|k| csum(0..n, |l| cmul(conj(q[l * n + k / n]), aq[l * n + k % n])))
        .collect()
}

/// Asserts `Q^H Q = I` within `tol`.
fn assert_unitary(q: &[(f64, f64)], n: usize, tol: f64, what: &str) {
    for i in 0..n {
        for j in 0..n {
            let d = csum(0..n, |l| cmul(conj(q[l * n + i]), q[l * n + j]));
            assert!(
                cabs(csub(d, (f64::from(i == j), 0.0))) <= tol,
                "{what}: Q^H Q ({i},{j})"
            );
        }
    }
}

/// The text of a one-operand LAPACK call on `[batch, n, n]` matrices as JAX 0.10.2 emits it
/// (column-major layouts, aliasing, frontend attributes).
fn jax_square_call(
    ty: &str,
    routine: &str,
    batch: usize,
    n: usize,
    result: &str,
    config: &str,
) -> String {
    format!(
        "HloModule j\nENTRY main {{\n  a = {ty}[{batch},{n},{n}]{{2,1,0}} parameter(0)\n  ROOT r = {result} custom-call(a), custom_call_target=\"lapack_{}{routine}_ffi\", operand_layout_constraints={{{ty}[{batch},{n},{n}]{{1,2,0}}}}, output_to_operand_aliasing={{{{0}}: (0, {{}})}}, api_version=API_VERSION_TYPED_FFI, frontend_attributes={{num_batch_dims=\"1\"}}, backend_config={{{config}}}\n}}\n",
        prefix(ty)
    )
}

/// `?sytrd` / `?hetrd` on both backends for every type, both triangles, orders 1, 4 and 5,
/// batched, in JAX's form: `Q` (the product of the stored reflectors) is unitary and `Q^H A Q`
/// is the real tridiagonal matrix of `d` and `e` for the Hermitian `A` of the triangle read;
/// `d` and `e` are also on the result's diagonals, the other triangle is untouched, and
/// `info = 0`. What is defined, not LAPACK's bits. Zeros reduce to zeros; NaN input gives NaNs
/// (JAX's wrapper checks only `info`), not a panic.
#[test]
fn sytrd_reduces_to_tridiagonal_form() {
    for ty in ["f32", "f64", "c64", "c128"] {
        let t = ElementType::from_name(ty).unwrap();
        let rt = match ty {
            "c64" => "f32",
            "c128" => "f64",
            r => r,
        };
        let routine = if t.is_complex() { "hetrd" } else { "sytrd" };
        for (batch, n) in [(1, 1), (2, 4), (1, 5)] {
            let e = n - 1;
            for (uplo, lower) in [(76, true), (85, false)] {
                let text = jax_square_call(
                    ty,
                    routine,
                    batch,
                    n,
                    &format!("({ty}[{batch},{n},{n}]{{1,2,0}}, {rt}[{batch},{n}]{{1,0}}, {rt}[{batch},{e}]{{1,0}}, {ty}[{batch},{e}]{{1,0}}, s32[{batch}]{{0}})"),
                    &format!("uplo = {uplo} : ui8"),
                );
                for (name, a) in complex_cases(t, batch, n, n) {
                    let av = cplx(match &a {
                        Literal::Array(x) => x,
                        _ => unreachable!(),
                    });
                    let scale = av.iter().fold(1e-30f64, |s, &x| s.max(cabs(x)));
                    for backend in ["interpreter", "cpu"] {
                        let what = format!("{ty} {batch}x{n}x{n} {name} uplo {uplo} on {backend}");
                        let out = run_on(backend, &text, std::slice::from_ref(&a));
                        assert_eq!(s32s(&out[4]), vec![0; batch], "{what}");
                        let (f, d, ee, tau) =
                            (cplx(&out[0]), reals(&out[1]), reals(&out[2]), cplx(&out[3]));
                        for b in 0..batch {
                            // The Hermitian matrix of the triangle read (real diagonal).
                            let h = |i: usize, j: usize| {
                                if i == j {
                                    (at3(&av, b, n, i, i).0, 0.0)
                                } else if (i > j) == lower {
                                    at3(&av, b, n, i, j)
                                } else {
                                    conj(at3(&av, b, n, j, i))
                                }
                            };
                            let hm: Vec<(f64, f64)> = (0..n * n).map(|k| h(k / n, k % n)).collect();
                            let mut refl: Vec<Reflector> = (0..e)
                                .map(|i| {
                                    let mut v = vec![(0.0, 0.0); n];
                                    if lower {
                                        v[i + 1] = (1.0, 0.0);
                                        for (r, x) in v.iter_mut().enumerate().skip(i + 2) {
                                            *x = at3(&f, b, n, r, i);
                                        }
                                    } else {
                                        v[i] = (1.0, 0.0);
                                        for (r, x) in v.iter_mut().enumerate().take(i) {
                                            *x = at3(&f, b, n, r, i + 1);
                                        }
                                    }
                                    (v, tau[b * e + i])
                                })
                                .collect();
                            if !lower {
                                refl.reverse();
                            }
                            let q = reflector_product(n, &refl);
                            assert_unitary(&q, n, eps_of(t, n), &what);
                            let tri = similar(&q, &hm, n);
                            let tol = eps_of(t, n) * scale;
                            for i in 0..n {
                                assert_eq!(at3(&f, b, n, i, i), (d[b * n + i], 0.0), "{what}: d");
                                for j in 0..n {
                                    let want = if i == j {
                                        d[b * n + i]
                                    } else if i == j + 1 || j == i + 1 {
                                        ee[b * e + i.min(j)]
                                    } else {
                                        0.0
                                    };
                                    assert!(
                                        cabs(csub(tri[i * n + j], (want, 0.0))) <= tol,
                                        "{what}: (Q^H A Q)({i},{j})"
                                    );
                                    let stored = (i > j) == lower && i != j;
                                    if (i == j + 1 && lower) || (j == i + 1 && !lower) {
                                        assert_eq!(at3(&f, b, n, i, j), (want, 0.0), "{what}: e");
                                    } else if !stored && i != j {
                                        assert_eq!(
                                            at3(&f, b, n, i, j),
                                            at3(&av, b, n, i, j),
                                            "{what}: other triangle"
                                        );
                                    }
                                }
                            }
                        }
                        if name == "zeros" {
                            assert!(d.iter().chain(&ee).all(|&x| x == 0.0), "{what}");
                        }
                    }
                }
                if n > 1 {
                    let nan = array(t, &[batch as i64, n as i64, n as i64], |k| {
                        if k % (n * n) == n * n - 1 {
                            (f64::NAN, 0.0)
                        } else {
                            (1.0, 0.5)
                        }
                    });
                    for backend in ["interpreter", "cpu"] {
                        let out = run_on(backend, &text, std::slice::from_ref(&nan));
                        assert!(
                            reals(&out[1]).iter().any(|x| x.is_nan()),
                            "{ty} NaN on {backend}"
                        );
                    }
                }
            }
        }
    }
}

/// `?gehrd` on both backends for every type, orders 1, 4 and 5, batched, in JAX's form
/// (`low = 1`, `high = n`) and with a smaller range (on a matrix already triangular outside
/// it, as LAPACK requires): `Q` (the product of the stored reflectors) is unitary and
/// `Q^H A Q` is the result with the reflectors' entries zero (upper Hessenberg); `tau` is zero
/// outside the range, `info = 0`. NaN input gives NaNs.
#[test]
fn gehrd_reduces_to_hessenberg_form() {
    for ty in ["f32", "f64", "c64", "c128"] {
        let t = ElementType::from_name(ty).unwrap();
        for (batch, n, low, high) in [(1, 1, 1, 1), (2, 4, 1, 4), (1, 5, 1, 5), (1, 5, 2, 4)] {
            let k = n - 1;
            let text = jax_square_call(
                ty,
                "gehrd",
                batch,
                n,
                &format!(
                    "({ty}[{batch},{n},{n}]{{1,2,0}}, {ty}[{batch},{k}]{{1,0}}, s32[{batch}]{{0}})"
                ),
                &format!("high = {high} : i32, low = {low} : i32"),
            );
            for (name, a) in complex_cases(t, batch, n, n) {
                // LAPACK's precondition: already triangular outside rows and columns
                // low - 1..high.
                let outside = |i: usize, j: usize| i > j && (j + 1 < low || i >= high);
                let a = match a {
                    Literal::Array(x) => {
                        let v = cplx(&x);
                        array(t, &x.shape.dims, |e| {
                            if outside(e / n % n, e % n) {
                                (0.0, 0.0)
                            } else {
                                v[e]
                            }
                        })
                    }
                    _ => unreachable!(),
                };
                let av = cplx(match &a {
                    Literal::Array(x) => x,
                    _ => unreachable!(),
                });
                let scale = av.iter().fold(1e-30f64, |s, &x| s.max(cabs(x)));
                for backend in ["interpreter", "cpu"] {
                    let what = format!("{ty} {batch}x{n}x{n} {name} {low}..{high} on {backend}");
                    let out = run_on(backend, &text, std::slice::from_ref(&a));
                    assert_eq!(s32s(&out[2]), vec![0; batch], "{what}");
                    let (f, tau) = (cplx(&out[0]), cplx(&out[1]));
                    let reduced = |j: usize| low - 1 <= j && j + 1 < high;
                    for b in 0..batch {
                        let refl: Vec<Reflector> = (0..k)
                            .map(|i| {
                                let mut v = vec![(0.0, 0.0); n];
                                v[i + 1] = (1.0, 0.0);
                                if reduced(i) {
                                    for (r, x) in v.iter_mut().enumerate().take(high).skip(i + 2) {
                                        *x = at3(&f, b, n, r, i);
                                    }
                                } else {
                                    assert_eq!(tau[b * k + i], (0.0, 0.0), "{what}: tau({i})");
                                }
                                (v, tau[b * k + i])
                            })
                            .collect();
                        let q = reflector_product(n, &refl);
                        assert_unitary(&q, n, eps_of(t, n), &what);
                        let x: Vec<(f64, f64)> =
                            (0..n * n).map(|e| at3(&av, b, n, e / n, e % n)).collect();
                        let h = similar(&q, &x, n);
                        for i in 0..n {
                            for j in 0..n {
                                let want = if reduced(j) && i > j + 1 {
                                    (0.0, 0.0)
                                } else {
                                    at3(&f, b, n, i, j)
                                };
                                assert!(
                                    cabs(csub(h[i * n + j], want)) <= eps_of(t, n) * scale,
                                    "{what}: (Q^H A Q)({i},{j})"
                                );
                            }
                        }
                    }
                }
            }
            if n > 1 {
                let nan = array(t, &[batch as i64, n as i64, n as i64], |k| {
                    if k % (n * n) == n * n - 1 {
                        (f64::NAN, 0.0)
                    } else {
                        (1.0, 0.5)
                    }
                });
                for backend in ["interpreter", "cpu"] {
                    let out = run_on(backend, &text, std::slice::from_ref(&nan));
                    assert!(
                        cplx(&out[0]).iter().any(|x| x.0.is_nan()),
                        "{ty} NaN on {backend}"
                    );
                }
            }
        }
    }
}

/// `?ormqr` / `?unmqr` on both backends for every type after JAX's `geqrf`, tall and square,
/// batched, from both sides, plain and (conjugate) transposed: the result is `op(Q) C` or
/// `C op(Q)` for `Q` the product of `geqrf`'s reflectors.
#[test]
fn ormqr_applies_q() {
    for ty in ["f32", "f64", "c64", "c128"] {
        let t = ElementType::from_name(ty).unwrap();
        let p = prefix(ty);
        let routine = if t.is_complex() { "unmqr" } else { "ormqr" };
        for (batch, m, na, other) in [(1, 1, 1, 2), (1, 4, 3, 2), (2, 4, 4, 3), (3, 6, 4, 5)] {
            let k = m.min(na);
            for left in [true, false] {
                for transpose in [false, true] {
                    let (cr, cc) = if left { (m, other) } else { (other, m) };
                    let text = format!(
                        "HloModule o\nENTRY main {{\n  a = {ty}[{batch},{m},{na}] parameter(0)\n  c = {ty}[{batch},{cr},{cc}] parameter(1)\n  g = ({ty}[{batch},{m},{na}]{{1,2,0}}, {ty}[{batch},{k}]{{1,0}}) custom-call(a), custom_call_target=\"lapack_{p}geqrf_ffi\", operand_layout_constraints={{{ty}[{batch},{m},{na}]{{1,2,0}}}}, output_to_operand_aliasing={{{{0}}: (0, {{}})}}, api_version=API_VERSION_TYPED_FFI, backend_config={{}}\n  f = {ty}[{batch},{m},{na}]{{1,2,0}} get-tuple-element(g), index=0\n  tau = {ty}[{batch},{k}]{{1,0}} get-tuple-element(g), index=1\n  o = {ty}[{batch},{cr},{cc}]{{1,2,0}} custom-call(f, tau, c), custom_call_target=\"lapack_{p}{routine}_ffi\", operand_layout_constraints={{{ty}[{batch},{m},{na}]{{1,2,0}}, {ty}[{batch},{k}]{{1,0}}, {ty}[{batch},{cr},{cc}]{{1,2,0}}}}, output_to_operand_aliasing={{{{}}: (2, {{}})}}, api_version=API_VERSION_TYPED_FFI, frontend_attributes={{num_batch_dims=\"1\"}}, backend_config={{left = {left}, transpose = {transpose}}}\n  ROOT r = ({ty}[{batch},{m},{na}], {ty}[{batch},{k}], {ty}[{batch},{cr},{cc}]) tuple(f, tau, o)\n}}\n"
                    );
                    let a = random(t, &[batch as i64, m as i64, na as i64], 51);
                    let c = random(t, &[batch as i64, cr as i64, cc as i64], 52);
                    let cv = cplx(match &c {
                        Literal::Array(x) => x,
                        _ => unreachable!(),
                    });
                    for backend in ["interpreter", "cpu"] {
                        let what = format!(
                            "{ty} {batch}x{m}x{na} left {left} transpose {transpose} on {backend}"
                        );
                        let out = run_on(backend, &text, &[a.clone(), c.clone()]);
                        let (f, tau, got) = (cplx(&out[0]), cplx(&out[1]), cplx(&out[2]));
                        for b in 0..batch {
                            let refl: Vec<Reflector> = (0..k)
                                .map(|i| {
                                    let v = (0..m)
                                        .map(|r| match r.cmp(&i) {
                                            std::cmp::Ordering::Less => (0.0, 0.0),
                                            std::cmp::Ordering::Equal => (1.0, 0.0),
                                            std::cmp::Ordering::Greater => f[(b * m + r) * na + i],
                                        })
                                        .collect();
                                    (v, tau[b * k + i])
                                })
                                .collect();
                            let q = reflector_product(m, &refl);
                            let op = |i: usize, j: usize| {
                                if transpose {
                                    conj(q[j * m + i])
                                } else {
                                    q[i * m + j]
                                }
                            };
                            let cm = |i: usize, j: usize| cv[(b * cr + i) * cc + j];
                            for i in 0..cr {
                                for j in 0..cc {
                                    let want = if left {
                                        csum(0..m, |l| cmul(op(i, l), cm(l, j)))
                                    } else {
                                        csum(0..m, |l| cmul(cm(i, l), op(l, j)))
                                    };
                                    let g = got[(b * cr + i) * cc + j];
                                    assert!(
                                        cabs(csub(g, want)) <= eps_of(t, m),
                                        "{what}: ({i},{j}) {g:?} {want:?}"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// JAX's `tridiagonal_solve_perturbed_ffi` (inverse iteration in `eigh_tridiagonal`) on both
/// backends for every type, batched, orders 1, 2 and 6, one and several right-hand sides:
/// `A x = b` for nonsingular systems; for `T - lambda I` with `lambda` an eigenvalue of
/// `T = tridiag(1, 2, 1)` (singular) a finite solution along the eigenvector; NaN input gives
/// NaNs, not a panic.
#[test]
fn perturbed_tridiagonal_solves() {
    let call = |ty: &str, batch: usize, n: usize, nrhs: usize| {
        format!(
            "HloModule t\nENTRY main {{\n  dl = {ty}[{batch},{n}] parameter(0)\n  d = {ty}[{batch},{n}] parameter(1)\n  du = {ty}[{batch},{n}] parameter(2)\n  b = {ty}[{batch},{n},{nrhs}] parameter(3)\n  ROOT x = {ty}[{batch},{n},{nrhs}]{{1,2,0}} custom-call(dl, d, du, b), custom_call_target=\"tridiagonal_solve_perturbed_ffi\", operand_layout_constraints={{{ty}[{batch},{n}]{{1,0}}, {ty}[{batch},{n}]{{1,0}}, {ty}[{batch},{n}]{{1,0}}, {ty}[{batch},{n},{nrhs}]{{1,2,0}}}}, api_version=API_VERSION_TYPED_FFI, frontend_attributes={{num_batch_dims=\"1\"}}, backend_config={{}}\n}}\n"
        )
    };
    for ty in ["f32", "f64", "c64", "c128"] {
        let t = ElementType::from_name(ty).unwrap();
        for (batch, n, nrhs) in [(1, 1, 1), (2, 2, 3), (3, 6, 1), (2, 6, 4)] {
            let text = call(ty, batch, n, nrhs);
            // Small diagonals in odd rows force interchanges.
            let bn = [batch as i64, n as i64];
            let args = [
                array(t, &bn, |k| (noise(61, k as u64) * 4.0, 1.0)),
                array(t, &bn, |k| {
                    if k % 2 == 1 {
                        (1e-3, 0.0)
                    } else {
                        (2.0 + noise(62, k as u64), -0.5)
                    }
                }),
                array(t, &bn, |k| (noise(63, k as u64), 0.25)),
                random(t, &[batch as i64, n as i64, nrhs as i64], 64),
            ];
            let vals: Vec<Vec<(f64, f64)>> = args
                .iter()
                .map(|a| {
                    cplx(match a {
                        Literal::Array(x) => x,
                        _ => unreachable!(),
                    })
                })
                .collect();
            for backend in ["interpreter", "cpu"] {
                let what = format!("{ty} {batch}x{n}x{nrhs} on {backend}");
                let x = cplx(&run_on(backend, &text, &args)[0]);
                for bt in 0..batch {
                    let at = |v: &Vec<(f64, f64)>, i: usize| v[bt * n + i];
                    let xv = |i: usize, j: usize| x[(bt * n + i) * nrhs + j];
                    for i in 0..n {
                        for j in 0..nrhs {
                            let mut s = cmul(at(&vals[1], i), xv(i, j));
                            let mut size = cabs(s);
                            if i > 0 {
                                let y = cmul(at(&vals[0], i), xv(i - 1, j));
                                size = size.max(cabs(y));
                                s = (s.0 + y.0, s.1 + y.1);
                            }
                            if i + 1 < n {
                                let y = cmul(at(&vals[2], i), xv(i + 1, j));
                                size = size.max(cabs(y));
                                s = (s.0 + y.0, s.1 + y.1);
                            }
                            let want = vals[3][(bt * n + i) * nrhs + j];
                            assert!(
                                cabs(csub(s, want)) <= eps_of(t, n) * size.max(1.0),
                                "{what}: row {i}"
                            );
                        }
                    }
                }
            }
        }
        // Singular: T - lambda_k I for the eigenvalues 2 + 2 cos(k pi / 6) of tridiag(1, 2, 1)
        // of order 5, one system per k; the solution is along sin(j k pi / 6).
        let n = 5;
        let text = call(ty, n, n, 1);
        let lambda = |k: usize| 2.0 + 2.0 * (((k + 1) as f64) * std::f64::consts::PI / 6.0).cos();
        let nn = [n as i64, n as i64];
        let args = [
            array(t, &nn, |_| (1.0, 0.0)),
            array(t, &nn, |e| (2.0 - lambda(e / n), 0.0)),
            array(t, &nn, |_| (1.0, 0.0)),
            array(t, &[n as i64, n as i64, 1], |e| {
                (1.0 + 0.1 * (e % n) as f64, 0.0)
            }),
        ];
        for backend in ["interpreter", "cpu"] {
            let x = cplx(&run_on(backend, &text, &args)[0]);
            for k in 0..n {
                let what = format!("{ty} eigenvalue {k} on {backend}");
                let v = &x[k * n..(k + 1) * n];
                assert!(
                    v.iter().all(|z| z.0.is_finite() && z.1.is_finite()),
                    "{what}: {v:?}"
                );
                let norm = v.iter().map(|z| cabs(*z).powi(2)).sum::<f64>().sqrt();
                let w: Vec<f64> = (0..n)
                    .map(|j| (((j + 1) * (k + 1)) as f64 * std::f64::consts::PI / 6.0).sin())
                    .collect();
                let wn = w.iter().map(|x| x * x).sum::<f64>().sqrt();
                // |<v, w>| = |v| |w|: parallel.
                let dot = csum(0..n, |j| (v[j].0 * w[j], v[j].1 * w[j]));
                assert!(
                    (cabs(dot) / (norm * wn) - 1.0).abs() < 1e-3,
                    "{what}: {v:?}"
                );
            }
        }
        let text = call(ty, 1, 3, 1);
        let args = [
            array(t, &[1, 3], |_| (1.0, 0.0)),
            array(t, &[1, 3], |k| {
                if k == 1 {
                    (f64::NAN, 0.0)
                } else {
                    (2.0, 0.0)
                }
            }),
            array(t, &[1, 3], |_| (1.0, 0.0)),
            array(t, &[1, 3, 1], |_| (1.0, 0.0)),
        ];
        for backend in ["interpreter", "cpu"] {
            let x = cplx(&run_on(backend, &text, &args)[0]);
            assert!(
                x.iter().any(|z| z.0.is_nan()),
                "{ty} NaN on {backend}: {x:?}"
            );
        }
    }
}

/// `?geqp3` on both backends for every type, tall, square and wide, batched, free columns (as
/// JAX passes `jpvt`) and one column fixed to the front: `jpvt` is a 1-based permutation with
/// the fixed column first, `A P = Q R` for `Q` the product of the stored reflectors, `R`'s
/// diagonal is real and, over the pivoted steps, non-increasing in modulus.
#[test]
fn geqp3_pivots_columns() {
    for ty in ["f32", "f64", "c64", "c128"] {
        let t = ElementType::from_name(ty).unwrap();
        for (batch, m, n) in [(1, 1, 1), (2, 5, 3), (1, 4, 4), (2, 3, 5)] {
            let k = m.min(n);
            let text = format!(
                "HloModule p\nENTRY main {{\n  a = {ty}[{batch},{m},{n}] parameter(0)\n  p = s32[{batch},{n}] parameter(1)\n  ROOT r = ({ty}[{batch},{m},{n}]{{1,2,0}}, s32[{batch},{n}]{{1,0}}, {ty}[{batch},{k}]{{1,0}}) custom-call(a, p), custom_call_target=\"lapack_{}geqp3_ffi\", operand_layout_constraints={{{ty}[{batch},{m},{n}]{{1,2,0}}, s32[{batch},{n}]{{1,0}}}}, output_to_operand_aliasing={{{{0}}: (0, {{}}), {{1}}: (1, {{}})}}, api_version=API_VERSION_TYPED_FFI, frontend_attributes={{num_batch_dims=\"1\"}}, backend_config={{}}\n}}\n",
                prefix(ty)
            );
            for fixed in [None, Some(n - 1)] {
                let p = array(ElementType::S32, &[batch as i64, n as i64], |_| (0.0, 0.0));
                let p = match (fixed, p) {
                    (Some(f), Literal::Array(mut x)) => {
                        for b in 0..batch {
                            let at = (b * n + f) * 4;
                            x.data[at..at + 4].copy_from_slice(&1i32.to_le_bytes());
                        }
                        Literal::Array(x)
                    }
                    (None, p) => p,
                    _ => unreachable!(),
                };
                for (name, a) in complex_cases(t, batch, m, n) {
                    let av = cplx(match &a {
                        Literal::Array(x) => x,
                        _ => unreachable!(),
                    });
                    let scale = av.iter().fold(1e-30f64, |s, &x| s.max(cabs(x)));
                    for backend in ["interpreter", "cpu"] {
                        let what =
                            format!("{ty} {batch}x{m}x{n} {name} fixed {fixed:?} on {backend}");
                        let out = run_on(backend, &text, &[a.clone(), p.clone()]);
                        let (f, piv, tau) = (cplx(&out[0]), s32s(&out[1]), cplx(&out[2]));
                        for b in 0..batch {
                            let piv = &piv[b * n..(b + 1) * n];
                            let mut sorted = piv.to_vec();
                            sorted.sort();
                            assert_eq!(
                                sorted,
                                (1..=n as i32).collect::<Vec<_>>(),
                                "{what}: {piv:?}"
                            );
                            if let Some(c) = fixed {
                                assert_eq!(piv[0], c as i32 + 1, "{what}: {piv:?}");
                            }
                            let fm = |i: usize, j: usize| f[(b * m + i) * n + j];
                            let refl: Vec<Reflector> = (0..k)
                                .map(|i| {
                                    let v = (0..m)
                                        .map(|r| match r.cmp(&i) {
                                            std::cmp::Ordering::Less => (0.0, 0.0),
                                            std::cmp::Ordering::Equal => (1.0, 0.0),
                                            std::cmp::Ordering::Greater => fm(r, i),
                                        })
                                        .collect();
                                    (v, tau[b * k + i])
                                })
                                .collect();
                            let q = reflector_product(m, &refl);
                            for i in 0..m {
                                for j in 0..n {
                                    let rec = csum(0..j.min(m - 1) + 1, |l| {
                                        if l <= j {
                                            cmul(q[i * m + l], fm(l, j))
                                        } else {
                                            (0.0, 0.0)
                                        }
                                    });
                                    let want = av[(b * m + i) * n + piv[j] as usize - 1];
                                    assert!(
                                        cabs(csub(rec, want)) <= eps_of(t, m.max(n)) * scale,
                                        "{what}: (A P)({i},{j})"
                                    );
                                }
                            }
                            let first = usize::from(fixed.is_some());
                            for i in 0..k {
                                assert_eq!(fm(i, i).1, 0.0, "{what}: R's diagonal");
                                if i > first {
                                    assert!(
                                        cabs(fm(i, i))
                                            <= cabs(fm(i - 1, i - 1)) + eps_of(t, m) * scale,
                                        "{what}: |R({i},{i})|"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The test matrices of `gees` and `geev` (`n`-by-`n`, batched): random, a real matrix whose
/// eigenvalues are complex-conjugate pairs (a rotation plus a shift on a diagonal of 2-by-2
/// blocks, then mixed by a similarity with a triangular matrix), a defective one (a Jordan
/// block: one eigenvector), and zeros.
fn eig_cases(ty: ElementType, batch: usize, n: usize) -> Vec<(&'static str, Literal)> {
    let dims = [batch as i64, n as i64, n as i64];
    vec![
        ("random", random(ty, &dims, 41)),
        (
            "pairs",
            array(ty, &dims, move |k| {
                let (b, i, j) = (k / (n * n), k / n % n, k % n);
                // Block diagonal B with blocks [[s, -r], [r, s]], then L B L^-1 for the unit
                // lower bidiagonal L = I + e_{i+1} e_i^T (L^-1 has (-1)^(i-j) below).
                let blk = |r: usize, c: usize| -> f64 {
                    let (s, rr) = (0.5 + r as f64 / 2.0 + b as f64, 1.0 + (r / 2) as f64);
                    if r / 2 != c / 2 {
                        0.0
                    } else if r == c {
                        if n % 2 == 1 && r == n - 1 {
                            -2.0
                        } else {
                            s - (r % 2) as f64 / 2.0
                        }
                    } else if r < c {
                        -rr
                    } else {
                        rr
                    }
                };
                let l = |r: usize, c: usize| f64::from(r == c) + f64::from(r == c + 1);
                let linv = |r: usize, c: usize| {
                    if r < c {
                        0.0
                    } else if (r - c).is_multiple_of(2) {
                        1.0
                    } else {
                        -1.0
                    }
                };
                let mut x = 0.0;
                for p in 0..n {
                    for q in 0..n {
                        x += l(i, p) * blk(p, q) * linv(q, j);
                    }
                }
                (x, 0.0)
            }),
        ),
        (
            "defective",
            array(ty, &dims, move |k| {
                let (i, j) = (k / n % n, k % n);
                let d = if i == j { 1.5 } else { 0.0 };
                let up = if j == i + 1 { 1.0 } else { 0.0 };
                (d + up, 0.0)
            }),
        ),
        ("zeros", array(ty, &dims, |_| (0.0, 0.0))),
    ]
}

/// The text of JAX 0.10.2's `?gees` call on `[batch, n, n]` matrices (column-major, the Schur
/// form aliasing the operand) with `mode` V or N.
fn jax_gees(ty: &str, batch: usize, n: usize, mode: char) -> String {
    let complex = ty.starts_with('c');
    let m = format!("{ty}[{batch},{n},{n}]{{1,2,0}}");
    let w = format!("{ty}[{batch},{n}]{{1,0}}");
    let ws = if complex { w } else { format!("{w}, {w}") };
    jax_square_call(
        ty,
        "gees",
        batch,
        n,
        &format!("({m}, {m}, {ws}, s32[{batch}]{{0}}, s32[{batch}]{{0}})"),
        &format!("mode = {} : ui8, sort = 78 : ui8", mode as u8),
    )
}

/// `?gees` on both backends for every type, orders 1, 4 and 5, batched, in JAX's form:
/// `Z` is unitary and `Z T Z^H = A`; `T` is upper triangular for complex types and upper
/// quasi-triangular for real ones with LAPACK's standard 2-by-2 blocks (equal diagonal entries,
/// off-diagonal entries of opposite signs, never two adjacent), whose eigenvalues (the diagonal,
/// or `a +- sqrt(-b c)` of a block) are `w` (`wr`, `wi`) in order; `sdim = info = 0`; with
/// `mode = N` the same `T`. What is defined, not LAPACK's bits. A NaN matrix gives a positive
/// `info` (the QR iteration never converges), as LAPACK's does.
#[test]
fn gees_computes_schur_forms() {
    for ty in ["f32", "f64", "c64", "c128"] {
        let t = ElementType::from_name(ty).unwrap();
        let complex = t.is_complex();
        for (batch, n) in [(1, 1), (2, 4), (1, 5)] {
            let text = jax_gees(ty, batch, n, 'V');
            let plain = jax_gees(ty, batch, n, 'N');
            for (name, a) in eig_cases(t, batch, n) {
                let av = cplx(match &a {
                    Literal::Array(x) => x,
                    _ => unreachable!(),
                });
                let scale = av.iter().fold(1e-30f64, |s, &x| s.max(cabs(x)));
                let tol = eps_of(t, n) * scale;
                for backend in ["interpreter", "cpu"] {
                    let what = format!("{ty} {batch}x{n}x{n} {name} on {backend}");
                    let out = run_on(backend, &text, std::slice::from_ref(&a));
                    let k = out.len();
                    assert_eq!(s32s(&out[k - 2]), vec![0; batch], "{what}: sdim");
                    assert_eq!(s32s(&out[k - 1]), vec![0; batch], "{what}: info");
                    let (tt, z) = (cplx(&out[0]), cplx(&out[1]));
                    let w: Vec<(f64, f64)> = if complex {
                        cplx(&out[2])
                    } else {
                        reals(&out[2]).into_iter().zip(reals(&out[3])).collect()
                    };
                    for b in 0..batch {
                        let zb: Vec<(f64, f64)> =
                            (0..n * n).map(|e| at3(&z, b, n, e / n, e % n)).collect();
                        assert_unitary(&zb, n, eps_of(t, n), &what);
                        // Z^H A Z = T.
                        let x: Vec<(f64, f64)> =
                            (0..n * n).map(|e| at3(&av, b, n, e / n, e % n)).collect();
                        let s = similar(&zb, &x, n);
                        let tb = |i: usize, j: usize| at3(&tt, b, n, i, j);
                        for i in 0..n {
                            for j in 0..n {
                                assert!(
                                    cabs(csub(s[i * n + j], tb(i, j))) <= tol,
                                    "{what}: (Z^H A Z)({i},{j})"
                                );
                                if i > j + 1 || (complex && i > j) {
                                    assert_eq!(tb(i, j), (0.0, 0.0), "{what}: T({i},{j})");
                                }
                            }
                        }
                        let wb = |i: usize| w[b * n + i];
                        let mut i = 0;
                        while i < n {
                            if i + 1 < n && tb(i + 1, i) != (0.0, 0.0) {
                                assert!(!complex, "{what}");
                                assert!(i + 2 >= n || tb(i + 2, i + 1) == (0.0, 0.0), "{what}");
                                let (a, bb, c, d) =
                                    (tb(i, i), tb(i, i + 1), tb(i + 1, i), tb(i + 1, i + 1));
                                assert_eq!(a, d, "{what}: block {i}");
                                assert!(bb.0 * c.0 < 0.0, "{what}: block {i}");
                                let im = bb.0.abs().sqrt() * c.0.abs().sqrt();
                                assert_eq!(wb(i).0, a.0, "{what}: w({i})");
                                assert_eq!(wb(i + 1), (a.0, -wb(i).1), "{what}: w({i})");
                                assert!((wb(i).1 - im).abs() <= tol, "{what}: w({i})");
                                i += 2;
                            } else {
                                assert_eq!(wb(i), tb(i, i), "{what}: w({i})");
                                i += 1;
                            }
                        }
                    }
                    // The Schur form does not depend on the vectors being asked for.
                    let out_n = run_on(backend, &plain, std::slice::from_ref(&a));
                    compare_arrays(&out[0], &out_n[0], Tolerance::Exact)
                        .unwrap_or_else(|e| panic!("{what}: mode N: {e}"));
                }
            }
            if n > 1 {
                let nan = array(t, &[batch as i64, n as i64, n as i64], |_| (f64::NAN, 0.0));
                for backend in ["interpreter", "cpu"] {
                    let out = run_on(backend, &text, std::slice::from_ref(&nan));
                    let info = s32s(&out[out.len() - 1]);
                    assert!(
                        info.iter().all(|&i| i > 0),
                        "{ty} NaN on {backend}: {info:?}"
                    );
                }
            }
        }
    }
}

/// The text of JAX 0.10.2's `?geev` call on `[batch, n, n]` matrices (column-major; the
/// eigenvalues as real and imaginary parts for real types, complex vectors for every type).
fn jax_geev(ty: &str, batch: usize, n: usize, left: char, right: char) -> String {
    let ct = match ty {
        "f32" => "c64",
        "f64" => "c128",
        c => c,
    };
    let w = format!("{ty}[{batch},{n}]{{1,0}}");
    let ws = if ty.starts_with('c') {
        w
    } else {
        format!("{w}, {w}")
    };
    let v = format!("{ct}[{batch},{n},{n}]{{1,2,0}}");
    format!(
        "HloModule j\nENTRY main {{\n  a = {ty}[{batch},{n},{n}]{{2,1,0}} parameter(0)\n  ROOT r = ({ws}, {v}, {v}, s32[{batch}]{{0}}) custom-call(a), custom_call_target=\"lapack_{}geev_ffi\", operand_layout_constraints={{{ty}[{batch},{n},{n}]{{1,2,0}}}}, api_version=API_VERSION_TYPED_FFI, frontend_attributes={{num_batch_dims=\"1\"}}, backend_config={{compute_left = {} : ui8, compute_right = {} : ui8}}\n}}\n",
        prefix(ty),
        left as u8,
        right as u8,
    )
}

/// `?geev` on both backends for every type, orders 1, 4 and 5, batched, in JAX's form, with
/// and without each side's vectors: `A v_k = w_k v_k` and `u_k^H A = w_k u_k^H` within a few
/// ulps of `|A|` (the defective case's vectors only to the square root of that, as for any
/// algorithm), every vector of unit norm, a vector not asked for all zeros, `info = 0`, and
/// the eigenvalues the same with and without vectors. For real types a real eigenvalue has a
/// real vector and a conjugate pair conjugate vectors (the positive imaginary part first); for
/// complex types the largest component is real. A NaN matrix gives `info = -4` and NaNs, as
/// JAX's kernel does.
#[test]
fn geev_computes_eigenvectors() {
    for ty in ["f32", "f64", "c64", "c128"] {
        let t = ElementType::from_name(ty).unwrap();
        let complex = t.is_complex();
        let nw = if complex { 1 } else { 2 };
        for (batch, n) in [(1, 1), (2, 4), (1, 5)] {
            let both = jax_geev(ty, batch, n, 'V', 'V');
            for (name, a) in eig_cases(t, batch, n) {
                let av = cplx(match &a {
                    Literal::Array(x) => x,
                    _ => unreachable!(),
                });
                let scale = av.iter().fold(1e-30f64, |s, &x| s.max(cabs(x)));
                let tol = if name == "defective" {
                    eps_of(t, n).sqrt() * scale
                } else {
                    eps_of(t, n) * scale
                };
                for backend in ["interpreter", "cpu"] {
                    let what = format!("{ty} {batch}x{n}x{n} {name} on {backend}");
                    let out = run_on(backend, &both, std::slice::from_ref(&a));
                    assert_eq!(s32s(&out[nw + 2]), vec![0; batch], "{what}: info");
                    let w: Vec<(f64, f64)> = if complex {
                        cplx(&out[0])
                    } else {
                        reals(&out[0]).into_iter().zip(reals(&out[1])).collect()
                    };
                    let (vl, vr) = (cplx(&out[nw]), cplx(&out[nw + 1]));
                    for b in 0..batch {
                        let ab = |i: usize, j: usize| at3(&av, b, n, i, j);
                        for k in 0..n {
                            let wk = w[b * n + k];
                            let r = |i: usize| at3(&vr, b, n, i, k);
                            let l = |i: usize| at3(&vl, b, n, i, k);
                            for i in 0..n {
                                let av_i = csum(0..n, |j| cmul(ab(i, j), r(j)));
                                assert!(
                                    cabs(csub(av_i, cmul(wk, r(i)))) <= tol,
                                    "{what}: (A v - w v)({i},{k})"
                                );
                                let ua_i = csum(0..n, |j| cmul(conj(l(j)), ab(j, i)));
                                assert!(
                                    cabs(csub(ua_i, cmul(wk, conj(l(i))))) <= tol,
                                    "{what}: (u^H A - w u^H)({i},{k})"
                                );
                            }
                            for v in [&r as &dyn Fn(usize) -> (f64, f64), &l] {
                                let norm = (0..n).map(|i| cabs(v(i)).powi(2)).sum::<f64>().sqrt();
                                assert!((norm - 1.0).abs() <= eps_of(t, n), "{what}: |v_{k}|");
                                if complex {
                                    // A component of largest modulus (up to rounding) is real
                                    // and positive.
                                    let big = (0..n).map(|i| cabs(v(i))).fold(0.0, f64::max);
                                    assert!(
                                        (0..n).map(v).any(|x| x.1 == 0.0
                                            && x.0 > 0.0
                                            && x.0 >= big * (1.0 - 1e-5)),
                                        "{what}: v_{k}"
                                    );
                                } else if wk.1 == 0.0 {
                                    assert!((0..n).all(|i| v(i).1 == 0.0), "{what}: real v_{k}");
                                }
                            }
                            if !complex && wk.1 > 0.0 {
                                assert_eq!(w[b * n + k + 1], conj(wk), "{what}: pair {k}");
                                for i in 0..n {
                                    assert_eq!(at3(&vr, b, n, i, k + 1), conj(r(i)), "{what}");
                                    assert_eq!(at3(&vl, b, n, i, k + 1), conj(l(i)), "{what}");
                                }
                            }
                        }
                    }
                    // Eigenvalues alone, and one side's vectors: the same values, and zeros
                    // for the vectors not asked for.
                    for (left, right) in [('N', 'N'), ('N', 'V'), ('V', 'N')] {
                        let text = jax_geev(ty, batch, n, left, right);
                        let o = run_on(backend, &text, std::slice::from_ref(&a));
                        for k in 0..nw {
                            compare_arrays(&out[k], &o[k], Tolerance::Exact)
                                .unwrap_or_else(|e| panic!("{what} {left}{right}: w: {e}"));
                        }
                        for (side, asked) in [(nw, left), (nw + 1, right)] {
                            if asked == 'V' {
                                compare_arrays(&out[side], &o[side], Tolerance::Exact)
                                    .unwrap_or_else(|e| panic!("{what} {left}{right}: {e}"));
                            } else {
                                assert!(cplx(&o[side]).iter().all(|&x| x == (0.0, 0.0)), "{what}");
                            }
                        }
                    }
                }
            }
            let nan = array(t, &[batch as i64, n as i64, n as i64], |k| {
                if k % (n * n) == 0 {
                    (f64::NAN, 0.0)
                } else {
                    (1.0, 0.5)
                }
            });
            for backend in ["interpreter", "cpu"] {
                let out = run_on(backend, &both, std::slice::from_ref(&nan));
                assert_eq!(s32s(&out[nw + 2]), vec![-4; batch], "{ty} NaN on {backend}");
                for o in &out[..nw + 2] {
                    assert!(
                        cplx(o).iter().all(|x| x.0.is_nan()),
                        "{ty} NaN on {backend}"
                    );
                }
            }
        }
    }
}
