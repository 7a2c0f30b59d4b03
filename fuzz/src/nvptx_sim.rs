//! The `nvptx-sim` target: a generated module on the `nvptx-sim` backend (the nvptx backend's
//! kernels after its `gpu` pipeline, run by the host simulator), against the reference
//! evaluator.
//!
//! The evaluator runs without flush-to-zero: the GPU kernels keep subnormals, as XLA's GPU
//! backend does by default. Inputs and per-type tolerances are the `cpu` target's
//! ([`crate::cpu::inputs`], [`crate::cpu::tolerance`]); NaN must match NaN. A module the
//! backend refuses with an error naming an op it does not compile (or an elided constant) is
//! [`Outcome::Unsupported`], not a failure, as is a module with a `reduce` whose init value is
//! not its reducer's identity (XLA leaves how often it is combined to the backend), or with a
//! total-order float `compare` of a value a math function may have computed (the sign of a
//! NaN the device's math returns is the device's).

use axle::backend::CompileOptions;
use axle::ir::entity::EntitySet;
use axle::ir::{compare_arrays, print_module, verify, CompId, InstId, Literal, Module};
use axle_analysis::eval::{evaluate_with, EvalOptions};

use crate::case::Case;
use crate::cpu::{inputs, tolerance};
use crate::outcome::Outcome;

/// Checks the property on a case.
pub fn check(case: &Case) -> Outcome {
    let m = case.program.build();
    if let Err(e) = verify(&m) {
        return Outcome::Fail(format!("the generator built an invalid module: {e}"));
    }
    check_module(&m, case.seed)
}

/// Whether a compile error is the backend saying what it does not support.
fn unsupported(msg: &str) -> bool {
    [
        "does not support",
        "not supported",
        "do not yet emit",
        "no math library function",
        "elided",
    ]
    .iter()
    .any(|s| msg.contains(s))
}

/// A `reduce` of `m` whose result XLA leaves to the backend, if any: its init value is not its
/// reducer's identity (or this check cannot tell: variadic, a reducer other than one binary op
/// of its parameters, an init that is not a constant); XLA lets a backend combine the init
/// any number of times (the GPU kernels combine it once per partial result, the evaluator
/// once), so only an identity gives one answer. Also one whose order matters beyond the
/// tolerances: a float type of fewer than 16 bits, a float product (once a partial product
/// overflows or underflows, a zero and an infinity meet in one order and not in another:
/// `0 * inf` is NaN; an f16 product of 32 values, CI smoke seed 1795910004 case 4021), or a
/// complex product (`x * (1, 0)` is not `x` when a part of `x` is infinite).
fn non_identity_reduce(m: &Module) -> Option<InstId> {
    use axle::ir::{AttrKey, Opcode::*};
    m.live_ids().into_iter().find(|&id| {
        if m.opcode(id) != Reduce {
            return false;
        }
        let ops = m.operands(id);
        let (Some(c), true) = (m.comp_attr(id, &AttrKey::ToApply), ops.len() == 2) else {
            return true;
        };
        let root = m.root(c);
        let params = m.params(c);
        let binary = params.len() == 2 && {
            let r = m.operands(root);
            r.len() == 2 && r.iter().all(|o| params.contains(o))
        };
        let Some(Literal::Array(init)) = m.literal(ops[1]) else {
            return true;
        };
        if !binary || init.data.is_empty() {
            return true;
        }
        let ty = init.ty();
        // Below 16 bits a float sum depends on its order, which XLA leaves to the backend
        // (the kernels combine in a tree, the evaluator in sequence); a complex product with
        // (1, 0) is not exact once a part is infinite.
        let product = m.opcode(root) == Multiply;
        if ty.is_float() && (ty.bits() < 16 || product) || ty.is_complex() && product {
            return true;
        }
        let (v, i) = (init.get_f64(0), init.get_i128(0));
        // A complex init's imaginary part (`get_f64` reads the real one): the identity of a
        // complex sum is (0, 0), not any value with a zero real part (a `c64` sum from
        // (-0, -1.375) took it 32 times, once per lane, nvptx-sim campaign seed 1117013 case
        // 3691).
        let imaginary = match ty {
            axle::ir::ElementType::C64 => init.data[4..8]
                .try_into()
                .map_or(f64::NAN, |b| f32::from_le_bytes(b) as f64),
            axle::ir::ElementType::C128 => init.data[8..16]
                .try_into()
                .map_or(f64::NAN, f64::from_le_bytes),
            _ => 0.0,
        };
        let bits = ty.bits();
        let (lowest, highest) = if !ty.is_int() || bits > 64 {
            (0, 0)
        } else if ty.is_signed_int() {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        } else {
            (0, (1i128 << bits) - 1)
        };
        let identity = match m.opcode(root) {
            Add | Or | Xor => v == 0.0 && imaginary == 0.0,
            Multiply => v == 1.0,
            And if ty.is_pred() => v == 1.0,
            And if ty.is_signed_int() => i == -1,
            And => i == highest,
            Maximum if ty.is_floating() => v == f64::NEG_INFINITY,
            Minimum if ty.is_floating() => v == f64::INFINITY,
            Maximum => ty.is_pred() && v == 0.0 || i == lowest,
            Minimum => ty.is_pred() && v == 1.0 || i == highest,
            _ => false,
        };
        !identity
    })
}

/// A `bitcast-convert` of `m` from a floating-point to an integer type, if any: the GPU's math
/// functions (libdevice, or the shared approximations) are within a few ulps of the
/// evaluator's, not bit for bit, and a float's bits compared as an integer are compared exactly
/// (a `tanh` one ulp apart, CI smoke seed 1795920001 case 3280).
fn float_bits_as_integers(m: &Module) -> Option<InstId> {
    let ty = |i| m.array_shape(i).map(|a| a.ty);
    m.live_ids().into_iter().find(|&id| {
        m.opcode(id) == axle::ir::Opcode::BitcastConvert
            && ty(id).is_some_and(|t| !t.is_floating())
            && m.operands(id)
                .first()
                .and_then(|&o| ty(o))
                .is_some_and(|t| t.is_floating())
    })
}

/// A float `compare` in total order (or a `topk`, whose order is total) of `m` of a value a
/// math function may have computed, if any: a total order sees a NaN's sign (`-NaN` sorts first, `+NaN` last), and the NaN a math
/// function returns is the device's (libdevice's `powf` of a negative base gives `+NaN`, the
/// evaluator's x86 `powf` the default `-NaN`; campaign seed 1712 case 2972). A value may have
/// come from a math function when it is one, when an operand may have, when it calls a
/// computation holding one that may have, or when it is a parameter of a called computation
/// in a module that calls a math function anywhere (a conservative guess).
fn total_order_of_math_nans(m: &Module) -> Option<InstId> {
    use axle::ir::{AttrKey, AttrValue, ComparisonType, Opcode::*};
    let ids = m.live_ids();
    let is_math = |i: InstId| {
        matches!(
            m.opcode(i),
            Atan2
                | Cbrt
                | Cos
                | Erf
                | Exp
                | Expm1
                | Log
                | Log1p
                | Logistic
                | Power
                | Rsqrt
                | Sin
                | Tan
                | Tanh
        )
    };
    if !ids.iter().any(|&i| is_math(i)) {
        return None;
    }
    let mut tainted: EntitySet<InstId> = EntitySet::with_capacity(m.inst_capacity());
    let mut comp_tainted: EntitySet<CompId> = EntitySet::with_capacity(m.comp_capacity());
    let callees = |i: InstId| -> Vec<CompId> {
        m.attrs(i)
            .iter()
            .flat_map(|(_, v)| match v {
                AttrValue::Comp(c) => vec![*c],
                AttrValue::Comps(cs) => cs.to_vec(),
                _ => Vec::new(),
            })
            .collect()
    };
    let mut changed = true;
    while changed {
        changed = false;
        for &i in &ids {
            if tainted.contains(i) {
                continue;
            }
            let t = is_math(i)
                || (m.opcode(i) == Parameter && m.parent(i) != m.entry())
                || m.operands(i).iter().any(|&o| tainted.contains(o))
                || callees(i).iter().any(|&c| comp_tainted.contains(c));
            if t {
                tainted.insert(i);
                comp_tainted.insert(m.parent(i));
                changed = true;
            }
        }
    }
    ids.into_iter().find(|&i| {
        // `topk` orders its floats totally without saying so (seed 1818003 case 23383).
        let total = match m.opcode(i) {
            Compare => matches!(
                m.attr(i, &AttrKey::Type),
                Some(AttrValue::CmpType(ComparisonType::TotalOrder))
            ),
            TopK => true,
            _ => false,
        };
        total && m.operands(i).iter().any(|&o| tainted.contains(o))
    })
}

/// Checks the property for `m` with inputs from `seed` (what a repro replays).
pub fn check_module(m: &Module, seed: u64) -> Outcome {
    if let Some(b) = float_bits_as_integers(m) {
        return Outcome::Unsupported(format!(
            "%{} compares a float's bits exactly, where the GPU's math is within ulps of the \
             evaluator's",
            m.name(b)
        ));
    }
    if let Some(c) = total_order_of_math_nans(m) {
        return Outcome::Unsupported(format!(
            "%{} orders floats totally, which sees the sign of the NaNs the device's math \
             functions return",
            m.name(c)
        ));
    }
    if let Some(r) = non_identity_reduce(m) {
        return Outcome::Unsupported(format!(
            "%{} starts from a value that is not its reducer's identity (or one not checked), \
             which XLA lets a backend combine any number of times",
            m.name(r)
        ));
    }
    let args = match inputs(m, seed) {
        Ok(a) => a,
        Err(e) => return Outcome::Fail(e),
    };
    let opts = EvalOptions {
        flush_denormals: false,
    };
    let want = match evaluate_with(m, &args, &opts) {
        Ok(w) => axle::run::flatten(w),
        Err(e) => return Outcome::Fail(format!("the evaluator rejects a generated module: {e}")),
    };
    let platform = match axle::backends::registry().get("nvptx-sim") {
        Ok(p) => p,
        Err(e) => return Outcome::Fail(e.to_string()),
    };
    let exe = match platform.compiler().compile(
        m.clone(),
        &CompileOptions {
            pipeline: Some("gpu".into()),
            ..Default::default()
        },
    ) {
        Ok(x) => x,
        Err(e) if unsupported(&e.message) => return Outcome::Unsupported(e.message),
        Err(e) => return Outcome::Fail(format!("nvptx-sim compile: {e}")),
    };
    let got = match axle::run::run_literals(platform.as_ref(), exe.as_ref(), &args) {
        Ok(g) => g,
        Err(e) => return Outcome::Fail(format!("nvptx-sim run: {e}")),
    };
    if got.len() != want.len() {
        return Outcome::Fail(format!(
            "{} results from nvptx-sim, {} from the evaluator",
            got.len(),
            want.len()
        ));
    }
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        if let Err(e) = compare_arrays(w, g, tolerance(w.ty())) {
            return Outcome::Fail(format!("result {k}: {e}\n{}", print_module(m)));
        }
    }
    Outcome::Pass
}
