//! The differential property of `tests/cpu.rs` on the inputs where semantics differ most:
//! generated modules run on `cpu` and on the reference evaluator with every input element drawn
//! from a pool of special values (signed zeros, infinities, NaN, subnormals, zero and minus one
//! for division, shift amounts around the bit width). The pool avoids large finite magnitudes,
//! integers included (a `convert` to f32 feeds float sums), so float sums cannot cancel
//! differently under reassociation; what remains must agree (floats within a few ulps, NaN
//! matching NaN, signed zeros exactly; integers bit for bit). `INT_MIN`/`INT_MAX` edge cases
//! (division, remainder, power, wrapping) are the XLA cases' (`intdiv_*`, `power_*`) and
//! `tests/eval_ops.rs`'s: converted to f32 and summed with small values, they cancel
//! differently in the evaluator's tree order and the vector lanes' order. The same holds for
//! integers made from floats (an infinity converts to `INT_MAX`, a NaN's bits are near `2^31`),
//! so modules that turn floats into integers and integers back into floats are discarded.

use axle::ir::gen::Recipe;
use axle::ir::literal::{f64_to_element, i128_to_element};
use axle::ir::{
    compare_arrays, print_module, ArrayLiteral, ArrayShape, ElementType, Literal, Module, Opcode,
    Shape, Tolerance,
};
use axle_codegen_cpu::{compile, CpuOptions};
use quickcheck::{QuickCheck, TestResult};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const FLOATS: &[f64] = &[
    0.0,
    -0.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    1e-45,
    -1e-45,
    1e-39,
    1.0,
    -1.0,
    2.0,
    0.5,
    -3.0,
    7.0,
    -64.0,
];

const INTS: &[i128] = &[-1, 0, 1, 2, 7, -8, 31, 32, 33, -32];

fn special_array(a: &ArrayShape, rng: &mut ChaCha8Rng) -> ArrayLiteral {
    let n = a.num_elements().max(0) as usize;
    let mut data = Vec::with_capacity(n * a.ty.byte_size());
    for _ in 0..n {
        let bytes = match a.ty {
            ElementType::Pred => vec![rng.random::<bool>() as u8],
            t if t.is_float() => f64_to_element(t, FLOATS[rng.random_range(0..FLOATS.len())]),
            t => i128_to_element(t, INTS[rng.random_range(0..INTS.len())]),
        };
        data.extend(bytes);
    }
    ArrayLiteral {
        shape: a.clone(),
        data,
    }
}

fn special_inputs(m: &Module, seed: u64) -> Option<Vec<Literal>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    m.params(m.entry())
        .iter()
        .map(|&p| match m.shape(p) {
            Shape::Array(a) => Some(Literal::Array(special_array(a, &mut rng))),
            _ => None,
        })
        .collect()
}

fn tolerance(a: &ArrayLiteral) -> Tolerance {
    if a.ty().is_floating() {
        Tolerance::Close {
            rtol: 1e-5,
            atol: 1e-6,
        }
    } else {
        Tolerance::Exact
    }
}

/// Whether `m` both turns floating-point values into integers (`convert` or `bitcast-convert`)
/// and integers back into floating point: then an infinity, a NaN or a float's bits become an
/// integer near `2^31` (or `2^63`) that may come back as a float and be summed with small
/// values, where the order of the sum decides the result (an f32 ulp at `2^31` is 256). The
/// pool avoids large magnitudes for that reason, so such modules are discarded; integer sums
/// of large values stay (wrapping integer addition does not depend on the order), and the
/// conversions' edge cases are `tests/eval_ops.rs`'s and the XLA cases'.
fn floats_round_trip_through_integers(m: &Module) -> bool {
    let ty = |i| m.array_shape(i).map(|a| a.ty);
    let converts = |from: fn(ElementType) -> bool, to: fn(ElementType) -> bool| {
        m.live_ids().into_iter().any(|i| {
            matches!(m.opcode(i), Opcode::Convert | Opcode::BitcastConvert)
                && ty(i).is_some_and(to)
                && m.operands(i).first().and_then(|&o| ty(o)).is_some_and(from)
        })
    };
    converts(ElementType::is_float, ElementType::is_int)
        && converts(ElementType::is_int, ElementType::is_floating)
}

fn same_results(r: Recipe, seed: u64) -> TestResult {
    let m = r.build();
    if floats_round_trip_through_integers(&m) {
        return TestResult::discard();
    }
    let Some(args) = special_inputs(&m, seed) else {
        return TestResult::discard();
    };
    let want = match axle::analysis::evaluate(&m, &args) {
        Ok(w) => axle::run::flatten(w),
        Err(e) => return TestResult::error(format!("evaluator: {e}")),
    };
    let opts = CpuOptions {
        libm_math: true,
        ..Default::default()
    };
    let got = match compile(&m, &opts)
        .map_err(|e| e.to_string())
        .and_then(|exe| exe.run_literals(&args).map_err(|e| e.to_string()))
    {
        Ok(g) => g,
        Err(e) => return TestResult::error(format!("cpu: {e}\n{}", print_module(&m))),
    };
    if got.len() != want.len() {
        return TestResult::error("different numbers of results");
    }
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        if let Err(e) = compare_arrays(w, g, tolerance(w)) {
            return TestResult::error(format!("result {k}: {e}\n{}", print_module(&m)));
        }
        // Signed zeros are exact wherever the evaluator gives a zero.
        if w.ty() == ElementType::F32 {
            for (i, (x, y)) in w.data.chunks(4).zip(g.data.chunks(4)).enumerate() {
                let x = f32::from_le_bytes(x.try_into().unwrap());
                let y = f32::from_le_bytes(y.try_into().unwrap());
                if x == 0.0 && y == 0.0 && x.is_sign_negative() != y.is_sign_negative() {
                    return TestResult::error(format!(
                        "result {k} element {i}: {x} vs {y}\n{}",
                        print_module(&m)
                    ));
                }
            }
        }
    }
    TestResult::passed()
}

#[test]
fn generated_modules_on_special_values_give_the_evaluators_results() {
    let tests = std::env::var("AXLE_QC_TESTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(80);
    QuickCheck::new()
        .tests(tests)
        .quickcheck(same_results as fn(Recipe, u64) -> TestResult);
}
