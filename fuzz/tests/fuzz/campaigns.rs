//! The campaign runner and the generator behind it: results do not depend on the number of
//! jobs, a few hundred cases of every target run clean, and generated modules reach every
//! opcode family, every element type, zero-sized dimensions, loops and conditionals.

use std::collections::BTreeSet;

use axle::ir::{Opcode, Shape};
use axle_fuzz::campaign::{generated_case, run, Options};
use axle_fuzz::Target;

fn campaign(target: Target, cases: u64, jobs: usize) -> (u64, Vec<u64>) {
    let opts = Options {
        target,
        cases,
        seed: 20,
        from: 0,
        jobs,
        out: None,
    };
    let r = run(&opts, &|_, _| {});
    (r.cases, r.findings.iter().map(|f| f.index).collect())
}

#[test]
fn cases_run_clean_at_any_job_count() {
    for (target, n) in [
        (Target::Parse, 300),
        (Target::Npy, 300),
        (Target::Pipeline, 150),
        (Target::NvptxSim, 100),
    ] {
        let one = campaign(target, n, 1);
        assert_eq!(one, campaign(target, n, 3), "{target:?}");
        assert_eq!(one, (n, vec![]), "{target:?}");
    }
}

#[test]
fn cases_depend_on_the_seed_and_index_alone() {
    assert_eq!(generated_case(5, 17), generated_case(5, 17));
    assert_ne!(generated_case(5, 17), generated_case(5, 18));
    assert_ne!(generated_case(5, 17), generated_case(6, 17));
}

#[test]
fn generated_modules_reach_every_family() {
    let mut ops = BTreeSet::new();
    let mut types = BTreeSet::new();
    let mut zero_sized = false;
    for k in 0..3000 {
        let m = generated_case(1, k).program.build();
        for id in m.live_ids() {
            ops.insert(m.opcode(id));
            if let Shape::Array(a) = m.shape(id) {
                types.insert(a.ty);
                zero_sized |= a.dims.contains(&0);
            }
        }
    }
    use Opcode::*;
    let want = [
        Abs,
        Add,
        And,
        Atan2,
        BitcastConvert,
        Broadcast,
        Call,
        Cbrt,
        Ceil,
        Cholesky,
        Clamp,
        Clz,
        Compare,
        Complex,
        Concatenate,
        Conditional,
        Constant,
        Convert,
        Convolution,
        Copy,
        Cos,
        Divide,
        Dot,
        DynamicSlice,
        DynamicUpdateSlice,
        Erf,
        Exp,
        Expm1,
        Fft,
        Floor,
        Gather,
        GetDimensionSize,
        GetTupleElement,
        Imag,
        Iota,
        IsFinite,
        Log,
        Log1p,
        Logistic,
        Map,
        Maximum,
        Minimum,
        MulHi,
        Multiply,
        Negate,
        Not,
        OptBarrier,
        Or,
        Pad,
        Parameter,
        Popcnt,
        Power,
        Real,
        Reduce,
        ReducePrecision,
        ReduceWindow,
        Remainder,
        Reshape,
        Reverse,
        RoundNearestAfz,
        RoundNearestEven,
        Rsqrt,
        Scatter,
        Select,
        SelectAndScatter,
        ShiftLeft,
        ShiftRightArithmetic,
        ShiftRightLogical,
        Sign,
        Sin,
        Slice,
        Sort,
        Sqrt,
        Subtract,
        Tan,
        Tanh,
        TopK,
        Transpose,
        TriangularSolve,
        Tuple,
        While,
        Xor,
    ];
    let missing: Vec<&str> = want
        .iter()
        .filter(|o| !ops.contains(o))
        .map(|o| o.name())
        .collect();
    assert!(missing.is_empty(), "never generated: {missing:?}");
    let untyped: Vec<&str> = axle::ir::ElementType::ALL
        .iter()
        .filter(|t| !types.contains(t))
        .map(|t| t.name())
        .collect();
    assert!(
        untyped.is_empty(),
        "element types never generated: {untyped:?}"
    );
    assert!(zero_sized, "no zero-sized dimension generated");
}
