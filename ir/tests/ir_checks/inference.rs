//! Shape inference, one test per op family, with the errors each family reports.

use crate::fixtures::*;
use axle_ir::attrs::{ConvDims, WindowDim};
use axle_ir::shape_inference::infer_shape_from;
use axle_ir::ElementType::{self, *};
use axle_ir::{AttrKey, AttrValue, ComparisonDirection, ComparisonType, FusionKind, Opcode};
use axle_ir::{CompId, OwnedShape};

fn dir(d: ComparisonDirection) -> (AttrKey, AttrValue) {
    (AttrKey::Direction, AttrValue::Direction(d))
}

#[test]
fn unary_ops() {
    let mut fx = Fx::new();
    let f = fx.p(arr(F32, &[4, 8]));
    let c = fx.p(arr(C64, &[4]));
    let s = fx.p(arr(S32, &[3]));
    let u = fx.p(arr(U8, &[3]));
    let p = fx.p(arr(Pred, &[2]));
    ok(fx.infer(Opcode::Exp, &[f], &[], None), "f32[4,8]");
    ok(fx.infer(Opcode::Abs, &[c], &[], None), "f32[4]");
    ok(fx.infer(Opcode::Abs, &[s], &[], None), "s32[3]");
    ok(fx.infer(Opcode::Real, &[c], &[], None), "f32[4]");
    ok(fx.infer(Opcode::Imag, &[f], &[], None), "f32[4,8]");
    ok(fx.infer(Opcode::IsFinite, &[f], &[], None), "pred[4,8]");
    ok(fx.infer(Opcode::Clz, &[s], &[], None), "s32[3]");
    ok(fx.infer(Opcode::Not, &[p], &[], None), "pred[2]");
    ok(fx.infer(Opcode::Sign, &[s], &[], None), "s32[3]");
    ok(fx.infer(Opcode::Copy, &[c], &[], None), "c64[4]");
    err(
        fx.infer(Opcode::Abs, &[u], &[], None),
        "abs: operand must have a signed integer, floating-point or complex element type, got u8",
    );
    err(
        fx.infer(Opcode::Exp, &[s], &[], None),
        "exponential: operand must have",
    );
    err(
        fx.infer(Opcode::Floor, &[c], &[], None),
        "floating-point element type, got c64",
    );
    err(
        fx.infer(Opcode::Not, &[f], &[], None),
        "not: operand must have a pred or integer",
    );
    err(fx.infer(Opcode::Popcnt, &[f], &[], None), "popcnt");
    err(fx.infer(Opcode::Negate, &[p], &[], None), "negate");
    err(
        fx.infer(Opcode::Tanh, &[f, f], &[], None),
        "tanh: expects 1 operand, got 2",
    );
    err(
        fx.infer(Opcode::Sqrt, &[], &[], None),
        "sqrt: expects 1 operand, got 0",
    );
}

#[test]
fn binary_ops() {
    let mut fx = Fx::new();
    let a = fx.p(arr(F32, &[8]));
    let b = fx.p(arr(F32, &[4]));
    let i = fx.p(arr(S32, &[8]));
    let p = fx.p(arr(Pred, &[8]));
    let f64_ = fx.p(arr(F64, &[8]));
    ok(fx.infer(Opcode::Add, &[a, a], &[], None), "f32[8]");
    ok(fx.infer(Opcode::And, &[i, i], &[], None), "s32[8]");
    ok(fx.infer(Opcode::Or, &[p, p], &[], None), "pred[8]");
    ok(fx.infer(Opcode::ShiftLeft, &[i, i], &[], None), "s32[8]");
    ok(fx.infer(Opcode::Maximum, &[p, p], &[], None), "pred[8]");
    ok(fx.infer(Opcode::Complex, &[a, a], &[], None), "c64[8]");
    ok(
        fx.infer(Opcode::Complex, &[f64_, f64_], &[], None),
        "c128[8]",
    );
    ok(fx.infer(Opcode::Atan2, &[a, a], &[], None), "f32[8]");
    err(
        fx.infer(Opcode::Add, &[a, b], &[], None),
        "add: operand 1 has shape f32[4] but operand 0 has f32[8]",
    );
    err(
        fx.infer(Opcode::Multiply, &[a, i], &[], None),
        "multiply: operand 1 has shape s32[8] but operand 0 has f32[8]",
    );
    err(
        fx.infer(Opcode::And, &[a, a], &[], None),
        "and: operands must have a pred or integer element type, got f32",
    );
    err(
        fx.infer(Opcode::ShiftRightLogical, &[a, a], &[], None),
        "shift-right-logical: operands must have an integer element type, got f32",
    );
    // On pred, add is or and multiply is and (as XLA's fusion rewrites them); subtract is
    // refused.
    assert!(fx.infer(Opcode::Add, &[p, p], &[], None).is_ok());
    assert!(fx.infer(Opcode::Multiply, &[p, p], &[], None).is_ok());
    err(
        fx.infer(Opcode::Subtract, &[p, p], &[], None),
        "subtract: operands must have an arithmetic",
    );
    err(fx.infer(Opcode::Atan2, &[i, i], &[], None), "atan2");
    err(fx.infer(Opcode::Complex, &[i, i], &[], None), "complex");
    err(
        fx.infer(Opcode::Add, &[a], &[], None),
        "add: expects 2 operands, got 1",
    );
}

#[test]
fn compare() {
    let mut fx = Fx::new();
    let a = fx.p(arr(F32, &[2, 3]));
    let i = fx.p(arr(S32, &[2, 3]));
    let u = fx.p(arr(U32, &[2, 3]));
    let lt = dir(ComparisonDirection::Lt);
    let ty = |t| (AttrKey::Type, AttrValue::CmpType(t));
    ok(
        fx.infer(Opcode::Compare, &[a, a], std::slice::from_ref(&lt), None),
        "pred[2,3]",
    );
    ok(
        fx.infer(
            Opcode::Compare,
            &[a, a],
            &[lt.clone(), ty(ComparisonType::TotalOrder)],
            None,
        ),
        "pred[2,3]",
    );
    ok(
        fx.infer(
            Opcode::Compare,
            &[u, u],
            &[lt.clone(), ty(ComparisonType::Unsigned)],
            None,
        ),
        "pred[2,3]",
    );
    err(
        fx.infer(
            Opcode::Compare,
            &[i, i],
            &[lt.clone(), ty(ComparisonType::Float)],
            None,
        ),
        "compare: comparison type FLOAT does not apply to s32 (expected SIGNED)",
    );
    err(
        fx.infer(Opcode::Compare, &[a, a], &[], None),
        "missing attribute `direction`",
    );
    err(
        fx.infer(Opcode::Compare, &[a, i], &[lt], None),
        "compare: operand 1 has shape s32[2,3]",
    );
}

#[test]
fn select_and_clamp() {
    let mut fx = Fx::new();
    let p = fx.p(arr(Pred, &[4]));
    let ps = fx.p(sc(Pred));
    let a = fx.p(arr(F32, &[4]));
    let b = fx.p(arr(F32, &[5]));
    let s = fx.p(sc(F32));
    let i = fx.p(arr(S32, &[4]));
    ok(fx.infer(Opcode::Select, &[p, a, a], &[], None), "f32[4]");
    err(
        fx.infer(Opcode::Select, &[i, a, a], &[], None),
        "select: the predicate (operand 0) must have element type pred, got s32[4]",
    );
    err(
        fx.infer(Opcode::Select, &[ps, a, a], &[], None),
        "the predicate has shape pred[]",
    );
    err(
        fx.infer(Opcode::Select, &[p, a, b], &[], None),
        "operand 2 has shape f32[5]",
    );
    ok(fx.infer(Opcode::Clamp, &[s, a, s], &[], None), "f32[4]");
    ok(fx.infer(Opcode::Clamp, &[a, a, a], &[], None), "f32[4]");
    err(
        fx.infer(Opcode::Clamp, &[b, a, s], &[], None),
        "clamp: bound (operand 0) has shape f32[5]",
    );
}

#[test]
fn conversions() {
    let mut fx = Fx::new();
    let f = fx.p(arr(F32, &[4]));
    let c = fx.p(arr(C64, &[4]));
    let u8x4 = fx.p(arr(U8, &[3, 4]));
    let fs = fx.p(sc(F32));
    ok(
        fx.infer(Opcode::Convert, &[f], &[], Some(arr(S32, &[4]))),
        "s32[4]",
    );
    err(
        fx.infer(Opcode::Convert, &[f], &[], None),
        "convert: the result element type must be given",
    );
    ok(
        fx.infer(Opcode::Convert, &[c], &[], Some(arr(F32, &[4]))),
        "f32[4]",
    );
    err(
        fx.infer(Opcode::Convert, &[c], &[], Some(arr(Pred, &[4]))),
        "from complex to pred",
    );
    ok(
        fx.infer(Opcode::BitcastConvert, &[f], &[], Some(arr(S32, &[4]))),
        "s32[4]",
    );
    ok(
        fx.infer(Opcode::BitcastConvert, &[f], &[], Some(arr(U8, &[4, 4]))),
        "u8[4,4]",
    );
    ok(
        fx.infer(Opcode::BitcastConvert, &[u8x4], &[], Some(arr(F32, &[3]))),
        "f32[3]",
    );
    err(
        fx.infer(Opcode::BitcastConvert, &[f], &[], Some(arr(F64, &[2]))),
        "needs a minor dimension of size 2",
    );
    ok(
        fx.infer(Opcode::Bitcast, &[fs], &[], Some(sc(S32))),
        "s32[]",
    );
    ok(
        fx.infer(Opcode::Bitcast, &[f], &[], Some(arr(F32, &[2, 2]))),
        "f32[2,2]",
    );
    err(
        fx.infer(Opcode::Bitcast, &[f], &[], Some(arr(F32, &[5]))),
        "bitcast: cannot bitcast f32[4] to f32[5]",
    );
    let eb = (AttrKey::ExponentBits, AttrValue::Int(5));
    let mb = (AttrKey::MantissaBits, AttrValue::Int(10));
    ok(
        fx.infer(
            Opcode::ReducePrecision,
            &[f],
            &[eb.clone(), mb.clone()],
            None,
        ),
        "f32[4]",
    );
    err(
        fx.infer(
            Opcode::ReducePrecision,
            &[f],
            &[(AttrKey::ExponentBits, AttrValue::Int(0)), mb],
            None,
        ),
        "exponent_bits must be at least 1",
    );
    let r = fx.p(arr(U32, &[4]));
    ok(
        fx.infer(Opcode::StochasticConvert, &[f, r], &[], Some(arr(S8, &[4]))),
        "s8[4]",
    );
    err(
        fx.infer(Opcode::StochasticConvert, &[f, f], &[], Some(arr(S8, &[4]))),
        "unsigned integer",
    );
}

#[test]
fn broadcast_reshape_transpose() {
    let mut fx = Fx::new();
    let v = fx.p(arr(F32, &[8]));
    let s = fx.p(sc(F32));
    let m = fx.p(arr(F32, &[2, 3, 4]));
    ok(
        fx.infer(
            Opcode::Broadcast,
            &[v],
            &[dims(&[1])],
            Some(arr(F32, &[4, 8])),
        ),
        "f32[4,8]",
    );
    ok(
        fx.infer(
            Opcode::Broadcast,
            &[s],
            &[dims(&[])],
            Some(arr(F32, &[4, 8])),
        ),
        "f32[4,8]",
    );
    err(
        fx.infer(
            Opcode::Broadcast,
            &[v],
            &[dims(&[0])],
            Some(arr(F32, &[4, 8])),
        ),
        "broadcast: operand dimension 0 (size 8) maps to result dimension 0 of size 4",
    );
    err(
        fx.infer(
            Opcode::Broadcast,
            &[v],
            &[dims(&[2])],
            Some(arr(F32, &[4, 8])),
        ),
        "out of range for rank 2",
    );
    err(
        fx.infer(
            Opcode::Broadcast,
            &[v],
            &[dims(&[0, 1])],
            Some(arr(F32, &[8, 8])),
        ),
        "must have one entry per operand dimension",
    );
    err(
        fx.infer(
            Opcode::Broadcast,
            &[v],
            &[dims(&[1])],
            Some(arr(S32, &[4, 8])),
        ),
        "element type s32 but the operand has f32",
    );
    err(
        fx.infer(Opcode::Broadcast, &[v], &[dims(&[1])], None),
        "must be given",
    );
    ok(
        fx.infer(Opcode::Reshape, &[m], &[], Some(arr(F32, &[6, 4]))),
        "f32[6,4]",
    );
    err(
        fx.infer(Opcode::Reshape, &[m], &[], Some(arr(F32, &[5, 4]))),
        "reshape: cannot reshape f32[2,3,4] (24 elements) to f32[5,4] (20 elements)",
    );
    ok(
        fx.infer(Opcode::Transpose, &[m], &[dims(&[2, 0, 1])], None),
        "f32[4,2,3]",
    );
    err(
        fx.infer(Opcode::Transpose, &[m], &[dims(&[0, 0, 1])], None),
        "repeats dimension 0",
    );
    err(
        fx.infer(Opcode::Transpose, &[m], &[dims(&[0, 1])], None),
        "permutation",
    );
    ok(
        fx.infer(Opcode::Reverse, &[m], &[dims(&[0, 2])], None),
        "f32[2,3,4]",
    );
    err(
        fx.infer(Opcode::Reverse, &[m], &[dims(&[3])], None),
        "out of range",
    );
}

#[test]
fn slices_concat_pad() {
    let mut fx = Fx::new();
    let m = fx.p(arr(F32, &[10, 8]));
    let n = fx.p(arr(F32, &[3, 8]));
    let i = fx.p(sc(S32));
    let j = fx.p(sc(S64));
    let z = fx.p(sc(F32));
    let sl = |s: &[[i64; 3]]| (AttrKey::Slice, AttrValue::Slice(s.into()));
    ok(
        fx.infer(Opcode::Slice, &[m], &[sl(&[[1, 5, 2], [0, 8, 3]])], None),
        "f32[2,3]",
    );
    err(
        fx.infer(Opcode::Slice, &[m], &[sl(&[[1, 11, 1], [0, 8, 1]])], None),
        "slice [1:11] of dimension 0 is out of bounds for size 10",
    );
    err(
        fx.infer(Opcode::Slice, &[m], &[sl(&[[0, 1, 0], [0, 8, 1]])], None),
        "stride",
    );
    err(
        fx.infer(Opcode::Slice, &[m], &[sl(&[[0, 1, 1]])], None),
        "slice has 1 entries",
    );
    let sizes = ints(AttrKey::DynamicSliceSizes, &[2, 8]);
    ok(
        fx.infer(
            Opcode::DynamicSlice,
            &[m, i, i],
            std::slice::from_ref(&sizes),
            None,
        ),
        "f32[2,8]",
    );
    err(
        fx.infer(
            Opcode::DynamicSlice,
            &[m, i],
            std::slice::from_ref(&sizes),
            None,
        ),
        "expects 2 start indices",
    );
    err(
        fx.infer(Opcode::DynamicSlice, &[m, i, j], &[sizes], None),
        "same type",
    );
    err(
        fx.infer(
            Opcode::DynamicSlice,
            &[m, i, i],
            &[ints(AttrKey::DynamicSliceSizes, &[11, 8])],
            None,
        ),
        "slice size 11 of dimension 0 is out of bounds",
    );
    ok(
        fx.infer(Opcode::DynamicUpdateSlice, &[m, n, i, i], &[], None),
        "f32[10,8]",
    );
    err(
        fx.infer(Opcode::DynamicUpdateSlice, &[n, m, i, i], &[], None),
        "larger than the operand",
    );
    ok(
        fx.infer(Opcode::Concatenate, &[m, n, m], &[dims(&[0])], None),
        "f32[23,8]",
    );
    err(
        fx.infer(Opcode::Concatenate, &[m, n], &[dims(&[1])], None),
        "cannot be concatenated",
    );
    err(
        fx.infer(Opcode::Concatenate, &[m, n], &[dims(&[2])], None),
        "out of range",
    );
    let pad = |p: &[[i64; 3]]| (AttrKey::Padding, AttrValue::Padding(p.into()));
    ok(
        fx.infer(Opcode::Pad, &[m, z], &[pad(&[[2, 1, 1], [-1, 3, 0]])], None),
        "f32[22,10]",
    );
    err(
        fx.infer(Opcode::Pad, &[m, z], &[pad(&[[0, 0, -1], [0, 0, 0]])], None),
        "interior",
    );
    err(
        fx.infer(
            Opcode::Pad,
            &[m, z],
            &[pad(&[[-20, 0, 0], [0, 0, 0]])],
            None,
        ),
        "negative",
    );
    err(
        fx.infer(Opcode::Pad, &[m, i], &[pad(&[[0, 0, 0], [0, 0, 0]])], None),
        "padding value",
    );
    let iota = int(AttrKey::IotaDimension, 1);
    ok(
        fx.infer(
            Opcode::Iota,
            &[],
            std::slice::from_ref(&iota),
            Some(arr(S32, &[4, 5])),
        ),
        "s32[4,5]",
    );
    err(
        fx.infer(
            Opcode::Iota,
            &[],
            &[int(AttrKey::IotaDimension, 2)],
            Some(arr(S32, &[4, 5])),
        ),
        "out of range",
    );
    err(fx.infer(Opcode::Iota, &[], &[iota], None), "must be given");
}

#[test]
fn tuples_and_leaves() {
    let mut fx = Fx::new();
    let a = fx.p(arr(F32, &[4]));
    let b = fx.p(sc(S32));
    let t = fx.p(OwnedShape::tuple(vec![arr(F32, &[4]), sc(S32)]));
    ok(
        fx.infer(Opcode::Tuple, &[a, b], &[], None),
        "(f32[4], s32[])",
    );
    ok(
        fx.infer(
            Opcode::GetTupleElement,
            &[t],
            &[int(AttrKey::Index, 1)],
            None,
        ),
        "s32[]",
    );
    err(
        fx.infer(
            Opcode::GetTupleElement,
            &[t],
            &[int(AttrKey::Index, 2)],
            None,
        ),
        "get-tuple-element: index 2 is out of range for (f32[4], s32[]) (2 elements)",
    );
    err(
        fx.infer(
            Opcode::GetTupleElement,
            &[a],
            &[int(AttrKey::Index, 0)],
            None,
        ),
        "must be a tuple",
    );
    ok(
        fx.infer(Opcode::Constant, &[], &[], Some(arr(F32, &[2]))),
        "f32[2]",
    );
    err(
        fx.infer(Opcode::Constant, &[], &[], None),
        "constant: the result shape cannot be inferred",
    );
    ok(
        fx.infer(
            Opcode::Parameter,
            &[],
            &[int(AttrKey::ParameterNumber, 0)],
            Some(sc(F32)),
        ),
        "f32[]",
    );
    err(
        fx.infer(Opcode::Parameter, &[], &[], Some(sc(F32))),
        "missing attribute `parameter_number`",
    );
    ok(
        fx.infer(Opcode::CustomCall, &[a, t], &[], Some(sc(U8))),
        "u8[]",
    );
    err(
        fx.infer(Opcode::CustomCall, &[a], &[], None),
        "must be given",
    );
    ok(
        fx.infer(Opcode::OptBarrier, &[t], &[], None),
        "(f32[4], s32[])",
    );
}

#[test]
fn reduce_family() {
    let mut fx = Fx::new();
    let sum = fx.binop("sum", Opcode::Add, F32);
    let isum = fx.binop("isum", Opcode::Add, S32);
    let argmax = fx.comp_with(
        "argmax",
        &[sc(F32), sc(S32), sc(F32), sc(S32)],
        |fx, c, ps| {
            let m = fx.raw(c, Opcode::Maximum, &[ps[0], ps[2]], vec![], &sc(F32), "mx");
            let i = fx.raw(c, Opcode::Maximum, &[ps[1], ps[3]], vec![], &sc(S32), "mi");
            fx.raw(
                c,
                Opcode::Tuple,
                &[m, i],
                vec![],
                &OwnedShape::tuple(vec![sc(F32), sc(S32)]),
                "t",
            )
        },
    );
    let x = fx.p(arr(F32, &[4, 8, 16]));
    let xi = fx.p(arr(S32, &[4, 8, 16]));
    let z = fx.p(sc(F32));
    let zi = fx.p(sc(S32));
    let to = |c| comp(AttrKey::ToApply, c);
    ok(
        fx.infer(Opcode::Reduce, &[x, z], &[dims(&[1]), to(sum)], None),
        "f32[4,16]",
    );
    ok(
        fx.infer(Opcode::Reduce, &[x, z], &[dims(&[0, 1, 2]), to(sum)], None),
        "f32[]",
    );
    ok(
        fx.infer(
            Opcode::Reduce,
            &[x, xi, z, zi],
            &[dims(&[2]), to(argmax)],
            None,
        ),
        "(f32[4,8], s32[4,8])",
    );
    err(
        fx.infer(Opcode::Reduce, &[x, z], &[dims(&[1]), to(isum)], None),
        "reduce: to_apply computation %isum: accumulator 0 is s32[] but the init value is f32[]",
    );
    err(
        fx.infer(
            Opcode::Reduce,
            &[x, xi, z, zi],
            &[dims(&[2]), to(sum)],
            None,
        ),
        "to_apply computation %sum must take 4 parameters, but takes 2",
    );
    err(
        fx.infer(Opcode::Reduce, &[x, z], &[dims(&[1, 1]), to(sum)], None),
        "repeats dimension 1",
    );
    err(
        fx.infer(Opcode::Reduce, &[x, x], &[dims(&[1]), to(sum)], None),
        "must be a scalar",
    );
    err(
        fx.infer(Opcode::Reduce, &[x, z, z], &[dims(&[1]), to(sum)], None),
        "expects N inputs",
    );
    err(
        fx.infer(Opcode::Reduce, &[x, z], &[dims(&[1])], None),
        "missing attribute `to_apply`",
    );
    err(
        fx.infer(
            Opcode::Reduce,
            &[x, z],
            &[dims(&[1]), to(CompId::new(99))],
            None,
        ),
        "computation #99 does not exist",
    );

    // reduce-window and select-and-scatter.
    let img = fx.p(arr(F32, &[2, 12, 12, 8]));
    let win = |size: [i64; 4], stride: [i64; 4], pad: [i64; 4]| {
        let w: Vec<WindowDim> = (0..4)
            .map(|i| WindowDim {
                size: size[i],
                stride: stride[i],
                pad_lo: pad[i],
                pad_hi: pad[i],
                ..Default::default()
            })
            .collect();
        (AttrKey::Window, AttrValue::Window(w.into()))
    };
    let w = win([1, 2, 2, 1], [1, 2, 2, 1], [0; 4]);
    ok(
        fx.infer(Opcode::ReduceWindow, &[img, z], &[w.clone(), to(sum)], None),
        "f32[2,6,6,8]",
    );
    ok(
        fx.infer(
            Opcode::ReduceWindow,
            &[img, z],
            &[win([1, 3, 3, 1], [1; 4], [0, 1, 1, 0]), to(sum)],
            None,
        ),
        "f32[2,12,12,8]",
    );
    err(
        fx.infer(
            Opcode::ReduceWindow,
            &[img, z],
            &[win([1, 0, 2, 1], [1; 4], [0; 4]), to(sum)],
            None,
        ),
        "window size of dimension 1 must be positive",
    );
    let ge = fx.binop("ge", Opcode::Compare, F32);
    let src = fx.p(arr(F32, &[2, 6, 6, 8]));
    let bad_src = fx.p(arr(F32, &[2, 5, 6, 8]));
    let sas = |s| {
        vec![
            w.clone(),
            comp(AttrKey::Select, ge),
            comp(AttrKey::Scatter, s),
        ]
    };
    ok(
        fx.infer(Opcode::SelectAndScatter, &[img, src, z], &sas(sum), None),
        "f32[2,12,12,8]",
    );
    err(
        fx.infer(
            Opcode::SelectAndScatter,
            &[img, bad_src, z],
            &sas(sum),
            None,
        ),
        "the source f32[2,5,6,8] must have the shape of the windowed operand, f32[2,6,6,8]",
    );
    err(
        fx.infer(
            Opcode::SelectAndScatter,
            &[img, src, z],
            &[w, comp(AttrKey::Select, sum), comp(AttrKey::Scatter, sum)],
            None,
        ),
        "select computation %sum must return pred[]",
    );
}

#[test]
fn dot() {
    let mut fx = Fx::new();
    let a = fx.p(arr(F32, &[8, 32]));
    let b = fx.p(arr(F32, &[32, 64]));
    let ba = fx.p(arr(BF16, &[3, 8, 5]));
    let bb = fx.p(arr(BF16, &[3, 5, 7]));
    let i = fx.p(arr(S32, &[4, 4]));
    let i32x4 = fx.p(arr(S32, &[32, 4]));
    let lc = |d: &[i64]| ints(AttrKey::LhsContractingDims, d);
    let rc = |d: &[i64]| ints(AttrKey::RhsContractingDims, d);
    let lb = |d: &[i64]| ints(AttrKey::LhsBatchDims, d);
    let rb = |d: &[i64]| ints(AttrKey::RhsBatchDims, d);
    ok(
        fx.infer(Opcode::Dot, &[a, b], &[lc(&[1]), rc(&[0])], None),
        "f32[8,64]",
    );
    ok(
        fx.infer(Opcode::Dot, &[a, a], &[lc(&[1]), rc(&[1])], None),
        "f32[8,8]",
    );
    ok(fx.infer(Opcode::Dot, &[a, b], &[], None), "f32[8,32,32,64]");
    let batch = [lb(&[0]), rb(&[0]), lc(&[2]), rc(&[1])];
    ok(
        fx.infer(Opcode::Dot, &[ba, bb], &batch, None),
        "bf16[3,8,7]",
    );
    ok(
        fx.infer(Opcode::Dot, &[ba, bb], &batch, Some(arr(F32, &[3, 8, 7]))),
        "f32[3,8,7]",
    );
    err(
        fx.infer(Opcode::Dot, &[a, b], &[lc(&[0]), rc(&[0])], None),
        "dot: contracting dimension sizes differ: lhs dimension 0 is 8 but rhs dimension 0 is 32",
    );
    err(
        fx.infer(Opcode::Dot, &[a, b], &[lc(&[1]), rc(&[])], None),
        "must have the same length",
    );
    err(
        fx.infer(Opcode::Dot, &[a, b], &[lc(&[2]), rc(&[0])], None),
        "out of range",
    );
    err(
        fx.infer(
            Opcode::Dot,
            &[ba, bb],
            &[lb(&[0]), rb(&[0]), lc(&[0]), rc(&[1])],
            None,
        ),
        "dimension 0 is in both lhs_batch_dims {0} and lhs_contracting_dims {0}",
    );
    err(
        fx.infer(
            Opcode::Dot,
            &[i, i],
            &[lc(&[1]), rc(&[0])],
            Some(arr(S8, &[4, 4])),
        ),
        "the result type s8 must not be narrower than the operand type s32",
    );
    err(
        fx.infer(Opcode::Dot, &[a, i32x4], &[lc(&[1]), rc(&[0])], None),
        "incompatible element types",
    );
}

fn conv_dims(rank_spatial: usize) -> ConvDims {
    // b01f_01io->b01f
    let sp: Vec<i64> = (1..=rank_spatial as i64).collect();
    ConvDims {
        input_batch: 0,
        input_feature: rank_spatial as i64 + 1,
        input_spatial: sp.clone().into(),
        kernel_input_feature: rank_spatial as i64,
        kernel_output_feature: rank_spatial as i64 + 1,
        kernel_spatial: (0..rank_spatial as i64).collect(),
        output_batch: 0,
        output_feature: rank_spatial as i64 + 1,
        output_spatial: sp.into(),
    }
}

#[test]
fn convolution() {
    let mut fx = Fx::new();
    let x = fx.p(arr(F32, &[2, 12, 12, 3]));
    let k = fx.p(arr(F32, &[3, 3, 3, 8]));
    let kd = fx.p(arr(F32, &[3, 3, 1, 6]));
    let xd = fx.p(arr(F32, &[2, 10, 10, 6]));
    let labels = (
        AttrKey::DimLabels,
        AttrValue::DimLabels(Box::new(conv_dims(2))),
    );
    let win = |size: i64, stride: i64, pad: i64, rhs: i64| {
        let w = vec![
            WindowDim {
                size,
                stride,
                pad_lo: pad,
                pad_hi: pad,
                rhs_dilate: rhs,
                ..Default::default()
            };
            2
        ];
        (AttrKey::Window, AttrValue::Window(w.into()))
    };
    ok(
        fx.infer(
            Opcode::Convolution,
            &[x, k],
            &[labels.clone(), win(3, 1, 1, 1)],
            None,
        ),
        "f32[2,12,12,8]",
    );
    ok(
        fx.infer(
            Opcode::Convolution,
            &[x, k],
            &[labels.clone(), win(3, 2, 1, 1)],
            None,
        ),
        "f32[2,6,6,8]",
    );
    // Depthwise, dilated (from the corpus): feature_group_count=6.
    ok(
        fx.infer(
            Opcode::Convolution,
            &[xd, kd],
            &[
                labels.clone(),
                win(3, 1, 2, 2),
                int(AttrKey::FeatureGroupCount, 6),
            ],
            None,
        ),
        "f32[2,10,10,6]",
    );
    err(
        fx.infer(
            Opcode::Convolution,
            &[x, k],
            &[labels.clone(), win(2, 1, 1, 1)],
            None,
        ),
        "window size 2 of spatial dimension 0 must equal the kernel's spatial size 3",
    );
    err(
        fx.infer(Opcode::Convolution, &[x, kd], &[labels.clone(), win(3, 1, 1, 1)], None),
        "the input feature dimension (3) must be feature_group_count (1) times the kernel input feature dimension (1)",
    );
    err(
        fx.infer(Opcode::Convolution, &[x, k], &[win(3, 1, 1, 1)], None),
        "missing attribute `dim_labels`",
    );
    let mut bad = conv_dims(2);
    bad.output_feature = 0;
    err(
        fx.infer(
            Opcode::Convolution,
            &[x, k],
            &[
                (AttrKey::DimLabels, AttrValue::DimLabels(Box::new(bad))),
                win(3, 1, 1, 1),
            ],
            None,
        ),
        "output dimension numbers {0,0,1,2} repeats dimension 0",
    );
}

#[test]
fn gather() {
    let mut fx = Fx::new();
    let table = fx.p(arr(F32, &[100, 16]));
    let idx = fx.p(arr(S32, &[28, 1]));
    let fidx = fx.p(arr(F32, &[28, 1]));
    let a = fx.p(arr(F32, &[16, 4]));
    let bidx = fx.p(arr(S32, &[16, 1, 1]));
    let g = |off: &[i64], col: &[i64], sim: &[i64], ivd: i64, ss: &[i64]| {
        vec![
            ints(AttrKey::OffsetDims, off),
            ints(AttrKey::CollapsedSliceDims, col),
            ints(AttrKey::StartIndexMap, sim),
            int(AttrKey::IndexVectorDim, ivd),
            ints(AttrKey::SliceSizes, ss),
        ]
    };
    ok(
        fx.infer(
            Opcode::Gather,
            &[table, idx],
            &g(&[1], &[0], &[0], 1, &[1, 16]),
            None,
        ),
        "f32[28,16]",
    );
    ok(
        fx.infer(
            Opcode::Gather,
            &[table, idx],
            &g(&[1, 2], &[], &[0], 1, &[1, 16]),
            None,
        ),
        "f32[28,1,16]",
    );
    // Batching dims (take_along_axis in the corpus).
    let mut attrs = g(&[], &[1], &[1], 2, &[1, 1]);
    attrs.push(ints(AttrKey::OperandBatchingDims, &[0]));
    attrs.push(ints(AttrKey::StartIndicesBatchingDims, &[0]));
    ok(
        fx.infer(Opcode::Gather, &[a, bidx], &attrs, None),
        "f32[16,1]",
    );
    err(
        fx.infer(
            Opcode::Gather,
            &[table, idx],
            &g(&[1], &[0], &[0, 1], 1, &[1, 16]),
            None,
        ),
        "start_index_map {0,1} has 2 entries but the index vector",
    );
    err(
        fx.infer(
            Opcode::Gather,
            &[table, idx],
            &g(&[1], &[1], &[0], 1, &[1, 16]),
            None,
        ),
        "collapsed or batching dimension 1 must have slice size at most 1, got 16",
    );
    err(
        fx.infer(
            Opcode::Gather,
            &[table, idx],
            &g(&[1], &[0], &[0], 1, &[1, 17]),
            None,
        ),
        "slice size 17 of dimension 1 is out of bounds",
    );
    err(
        fx.infer(
            Opcode::Gather,
            &[table, idx],
            &g(&[1], &[], &[0], 1, &[1, 16]),
            None,
        ),
        "must cover",
    );
    err(
        fx.infer(
            Opcode::Gather,
            &[table, idx],
            &g(&[1], &[0], &[0], 3, &[1, 16]),
            None,
        ),
        "index_vector_dim 3",
    );
    err(
        fx.infer(
            Opcode::Gather,
            &[table, fidx],
            &g(&[1], &[0], &[0], 1, &[1, 16]),
            None,
        ),
        "integers",
    );
    let mut bad = g(&[], &[1], &[1], 2, &[1, 1]);
    bad.push(ints(AttrKey::OperandBatchingDims, &[0]));
    bad.push(ints(AttrKey::StartIndicesBatchingDims, &[2]));
    err(
        fx.infer(Opcode::Gather, &[a, bidx], &bad, None),
        "must not contain index_vector_dim 2",
    );
}

#[test]
fn scatter() {
    let mut fx = Fx::new();
    let sum = fx.binop("sum", Opcode::Add, F32);
    let isum = fx.binop("isum", Opcode::Add, S32);
    let x = fx.p(arr(F32, &[20, 8]));
    let idx = fx.p(arr(S32, &[5, 1]));
    let upd = fx.p(arr(F32, &[5, 8]));
    let bad_upd = fx.p(arr(F32, &[5, 9]));
    let s = |uwd: &[i64], iwd: &[i64], sdod: &[i64], to| {
        vec![
            ints(AttrKey::UpdateWindowDims, uwd),
            ints(AttrKey::InsertedWindowDims, iwd),
            ints(AttrKey::ScatterDimsToOperandDims, sdod),
            int(AttrKey::IndexVectorDim, 1),
            comp(AttrKey::ToApply, to),
        ]
    };
    ok(
        fx.infer(
            Opcode::Scatter,
            &[x, idx, upd],
            &s(&[1], &[0], &[0], sum),
            None,
        ),
        "f32[20,8]",
    );
    let sum2 = fx.comp_with(
        "sum2",
        &[sc(F32), sc(F32), sc(F32), sc(F32)],
        |fx, c, ps| {
            let a = fx.raw(c, Opcode::Add, &[ps[0], ps[2]], vec![], &sc(F32), "a");
            let b = fx.raw(c, Opcode::Add, &[ps[1], ps[3]], vec![], &sc(F32), "b");
            let t = OwnedShape::tuple(vec![sc(F32), sc(F32)]);
            fx.raw(c, Opcode::Tuple, &[a, b], vec![], &t, "t")
        },
    );
    ok(
        fx.infer(
            Opcode::Scatter,
            &[x, x, idx, upd, upd],
            &s(&[1], &[0], &[0], sum2),
            None,
        ),
        "(f32[20,8], f32[20,8])",
    );
    err(
        fx.infer(
            Opcode::Scatter,
            &[x, idx, bad_upd],
            &s(&[1], &[0], &[0], sum),
            None,
        ),
        "update window dimension 1 (size 9) exceeds operand dimension 1 (size 8)",
    );
    err(
        fx.infer(
            Opcode::Scatter,
            &[x, idx, upd],
            &s(&[1], &[0], &[0], isum),
            None,
        ),
        "to_apply computation %isum",
    );
    err(
        fx.infer(
            Opcode::Scatter,
            &[x, idx, upd],
            &s(&[1], &[], &[0], sum),
            None,
        ),
        "must cover",
    );
    err(
        fx.infer(Opcode::Scatter, &[x, idx], &s(&[1], &[0], &[0], sum), None),
        "expects N inputs",
    );
}

#[test]
fn sort_map_while_conditional_call() {
    let mut fx = Fx::new();
    let lt = fx.binop("lt", Opcode::Compare, F32);
    let lt2 = fx.comp_with("lt2", &[sc(F32), sc(F32), sc(S32), sc(S32)], |fx, c, ps| {
        fx.raw(
            c,
            Opcode::Compare,
            &[ps[0], ps[1]],
            vec![dir(ComparisonDirection::Lt)],
            &sc(Pred),
            "r",
        )
    });
    let add = fx.binop("add", Opcode::Add, F32);
    let k = fx.p(arr(F32, &[6, 40]));
    let v = fx.p(arr(S32, &[6, 40]));
    let to = |c| comp(AttrKey::ToApply, c);
    ok(
        fx.infer(Opcode::Sort, &[k], &[dims(&[1]), to(lt)], None),
        "f32[6,40]",
    );
    ok(
        fx.infer(Opcode::Sort, &[k, v], &[dims(&[1]), to(lt2)], None),
        "(f32[6,40], s32[6,40])",
    );
    err(
        fx.infer(Opcode::Sort, &[k, v], &[dims(&[1]), to(lt)], None),
        "sort: comparator %lt must take 4 parameters (two per operand), but takes 2",
    );
    err(
        fx.infer(Opcode::Sort, &[k], &[dims(&[1]), to(add)], None),
        "comparator %add must return pred[]",
    );
    err(
        fx.infer(Opcode::Sort, &[k], &[dims(&[2]), to(lt)], None),
        "out of range",
    );
    ok(
        fx.infer(Opcode::Map, &[k, k], &[to(add)], None),
        "f32[6,40]",
    );
    err(
        fx.infer(Opcode::Map, &[k], &[to(add)], None),
        "must take 1 parameters, but takes 2",
    );

    // while: state (s32[], f32[4]).
    let st = OwnedShape::tuple(vec![sc(S32), arr(F32, &[4])]);
    let st2 = st.clone();
    let cond = fx.comp_with("cond", std::slice::from_ref(&st), |fx, c, ps| {
        let i = fx.raw(
            c,
            Opcode::GetTupleElement,
            &[ps[0]],
            vec![int(AttrKey::Index, 0)],
            &sc(S32),
            "i",
        );
        fx.raw(
            c,
            Opcode::Compare,
            &[i, i],
            vec![dir(ComparisonDirection::Lt)],
            &sc(Pred),
            "lt",
        )
    });
    let body = fx.comp_with("body", std::slice::from_ref(&st), |_, _, ps| ps[0]);
    let bad_body = fx.comp_with("bad_body", std::slice::from_ref(&st), |fx, c, ps| {
        fx.raw(
            c,
            Opcode::GetTupleElement,
            &[ps[0]],
            vec![int(AttrKey::Index, 0)],
            &sc(S32),
            "i",
        )
    });
    let init = fx.p(st2);
    let w = |c, b| vec![comp(AttrKey::Condition, c), comp(AttrKey::Body, b)];
    ok(
        fx.infer(Opcode::While, &[init], &w(cond, body), None),
        "(s32[], f32[4])",
    );
    err(
        fx.infer(Opcode::While, &[init], &w(cond, bad_body), None),
        "while: body computation %bad_body must return the loop state's shape (s32[], f32[4]), but returns s32[]",
    );
    err(
        fx.infer(Opcode::While, &[init], &w(body, body), None),
        "condition computation %body must return pred[]",
    );
    err(
        fx.infer(Opcode::While, &[k], &w(cond, body), None),
        "must take one parameter of the loop state's shape f32[6,40]",
    );

    // conditional.
    let b0 = fx.comp_with("b0", &[arr(F32, &[6, 40])], |fx, c, ps| {
        fx.raw(
            c,
            Opcode::Negate,
            &[ps[0]],
            vec![],
            &arr(F32, &[6, 40]),
            "n",
        )
    });
    let b1 = fx.comp_with("b1", &[arr(S32, &[6, 40])], |fx, c, ps| {
        fx.raw(
            c,
            Opcode::Convert,
            &[ps[0]],
            vec![],
            &arr(F32, &[6, 40]),
            "c",
        )
    });
    let b2 = fx.comp_with("b2", &[arr(S32, &[6, 40])], |_, _, ps| ps[0]);
    let bi = fx.p(sc(S32));
    let bp = fx.p(sc(Pred));
    let br = |cs: &[CompId]| (AttrKey::BranchComputations, AttrValue::Comps(cs.into()));
    ok(
        fx.infer(Opcode::Conditional, &[bi, k, v], &[br(&[b0, b1])], None),
        "f32[6,40]",
    );
    ok(
        fx.infer(Opcode::Conditional, &[bp, k, v], &[br(&[b0, b1])], None),
        "f32[6,40]",
    );
    err(
        fx.infer(Opcode::Conditional, &[bi, k, v], &[br(&[b0, b2])], None),
        "branch 1 computation %b2 returns s32[6,40] but branch 0 (%b0) returns f32[6,40]",
    );
    err(
        fx.infer(Opcode::Conditional, &[bp, k], &[br(&[b0])], None),
        "exactly 2 branches",
    );
    err(
        fx.infer(Opcode::Conditional, &[bi, v, v], &[br(&[b0, b1])], None),
        "branch 0 computation %b0 must take one parameter of shape s32[6,40]",
    );
    err(
        fx.infer(Opcode::Conditional, &[k, k], &[br(&[b0])], None),
        "the branch index (operand 0) must be a scalar",
    );

    // call and fusion.
    ok(fx.infer(Opcode::Call, &[k], &[to(b0)], None), "f32[6,40]");
    err(
        fx.infer(Opcode::Call, &[v], &[to(b0)], None),
        "call: operand 0 has shape s32[6,40] but parameter 0 of computation %b0 has f32[6,40]",
    );
    err(
        fx.infer(Opcode::Call, &[k, k], &[to(b0)], None),
        "takes 1 parameters but is called with 2 operands",
    );
    let kind = (AttrKey::Kind, AttrValue::FusionKind(FusionKind::Loop));
    ok(
        fx.infer(
            Opcode::Fusion,
            &[k],
            &[kind, comp(AttrKey::Calls, b0)],
            None,
        ),
        "f32[6,40]",
    );
    err(
        fx.infer(Opcode::Fusion, &[k], &[comp(AttrKey::Calls, b0)], None),
        "missing attribute `kind`",
    );
}

#[test]
fn linear_algebra_fft_topk_batchnorm() {
    let mut fx = Fx::new();
    let a = fx.p(arr(F32, &[3, 4, 4]));
    let b = fx.p(arr(F32, &[3, 4, 5]));
    let c = fx.p(arr(C64, &[8, 16]));
    let r = fx.p(arr(F32, &[8, 16]));
    let x = fx.p(arr(F32, &[2, 5, 5, 3]));
    let f3 = fx.p(arr(F32, &[3]));
    ok(fx.infer(Opcode::Cholesky, &[a], &[], None), "f32[3,4,4]");
    err(
        fx.infer(Opcode::Cholesky, &[b], &[], None),
        "square matrices",
    );
    let left = (AttrKey::LeftSide, AttrValue::Bool(true));
    ok(
        fx.infer(
            Opcode::TriangularSolve,
            &[a, b],
            std::slice::from_ref(&left),
            None,
        ),
        "f32[3,4,5]",
    );
    err(
        fx.infer(Opcode::TriangularSolve, &[a, b], &[], None),
        "does not fit",
    );
    let ft = |t: &str, l: &[i64]| {
        vec![
            (AttrKey::FftType, AttrValue::Ident(t.into())),
            ints(AttrKey::FftLength, l),
        ]
    };
    ok(
        fx.infer(Opcode::Fft, &[c], &ft("FFT", &[16]), None),
        "c64[8,16]",
    );
    ok(
        fx.infer(Opcode::Fft, &[r], &ft("RFFT", &[16]), None),
        "c64[8,9]",
    );
    let c9 = fx.p(arr(C64, &[8, 9]));
    ok(
        fx.infer(Opcode::Fft, &[c9], &ft("IRFFT", &[16]), None),
        "f32[8,16]",
    );
    err(
        fx.infer(Opcode::Fft, &[r], &ft("FFT", &[16]), None),
        "needs a complex operand",
    );
    let c1 = fx.p(arr(C64, &[8, 1]));
    err(
        fx.infer(Opcode::Fft, &[c1], &ft("IRFFT", &[-1]), None),
        "must not be negative",
    );
    err(
        fx.infer(Opcode::Fft, &[c], &ft("FFT", &[8]), None),
        "must be 8",
    );
    ok(
        fx.infer(Opcode::TopK, &[r], &[int(AttrKey::K, 5)], None),
        "(f32[8,5], s32[8,5])",
    );
    err(
        fx.infer(Opcode::TopK, &[r], &[int(AttrKey::K, 17)], None),
        "k=17 is out of range",
    );
    let fi = (
        AttrKey::Other("feature_index".into()),
        AttrValue::Raw("3".into()),
    );
    ok(
        fx.infer(
            Opcode::BatchNormTraining,
            &[x, f3, f3],
            std::slice::from_ref(&fi),
            None,
        ),
        "(f32[2,5,5,3], f32[3], f32[3])",
    );
    ok(
        fx.infer(
            Opcode::BatchNormInference,
            &[x, f3, f3, f3, f3],
            std::slice::from_ref(&fi),
            None,
        ),
        "f32[2,5,5,3]",
    );
    ok(
        fx.infer(Opcode::BatchNormGrad, &[x, f3, f3, f3, x], &[fi], None),
        "(f32[2,5,5,3], f32[3], f32[3])",
    );
    let fi0 = (AttrKey::Other("feature_index".into()), AttrValue::Int(0));
    err(
        fx.infer(Opcode::BatchNormTraining, &[x, f3, f3], &[fi0], None),
        "must be f32[2]",
    );
}

#[test]
fn tokens_rng_collectives_dynamic() {
    let mut fx = Fx::new();
    let tok = fx.p(OwnedShape::Token);
    let x = fx.p(arr(F32, &[4, 8]));
    let s = fx.p(sc(F32));
    let sz = fx.p(sc(S32));
    let state = fx.p(arr(U64, &[2]));
    ok(
        fx.infer(Opcode::AfterAll, &[tok, tok], &[], None),
        "token[]",
    );
    err(
        fx.infer(Opcode::AfterAll, &[tok, x], &[], None),
        "operand 1 must be a token, got f32[4,8]",
    );
    let inf = OwnedShape::tuple(vec![arr(F32, &[4]), OwnedShape::Token]);
    ok(
        fx.infer(Opcode::Infeed, &[tok], &[], Some(inf)),
        "(f32[4], token[])",
    );
    err(
        fx.infer(Opcode::Infeed, &[tok], &[], Some(arr(F32, &[4]))),
        "(data, token[])",
    );
    ok(fx.infer(Opcode::Outfeed, &[x, tok], &[], None), "token[]");
    ok(
        fx.infer(Opcode::Send, &[x, tok], &[], None),
        "(f32[4,8], u32[], token[])",
    );
    ok(
        fx.infer(Opcode::AddDependency, &[x, tok], &[], None),
        "f32[4,8]",
    );
    ok(fx.infer(Opcode::ReplicaId, &[], &[], None), "u32[]");
    let dist = |d: &str| (AttrKey::Distribution, AttrValue::Ident(d.into()));
    ok(
        fx.infer(
            Opcode::Rng,
            &[s, s],
            &[dist("rng_uniform")],
            Some(arr(F32, &[3])),
        ),
        "f32[3]",
    );
    err(
        fx.infer(
            Opcode::Rng,
            &[s, s],
            &[dist("rng_normal")],
            Some(arr(S32, &[3])),
        ),
        "operand 0 has type f32 but the result has s32",
    );
    let rbg = OwnedShape::tuple(vec![arr(U64, &[2]), arr(U32, &[4])]);
    ok(
        fx.infer(Opcode::RngBitGenerator, &[state], &[], Some(rbg)),
        "(u64[2], u32[4])",
    );
    ok(
        fx.infer(Opcode::GetDimensionSize, &[x], &[dims(&[1])], None),
        "s32[]",
    );
    ok(
        fx.infer(Opcode::SetDimensionSize, &[x, sz], &[dims(&[1])], None),
        "f32[4,<=8]",
    );
    err(
        fx.infer(Opcode::SetDimensionSize, &[x, s], &[dims(&[1])], None),
        "must be s32",
    );
    let sum = fx.binop("sum", Opcode::Add, F32);
    ok(
        fx.infer(
            Opcode::AllReduce,
            &[x],
            &[comp(AttrKey::ToApply, sum)],
            None,
        ),
        "f32[4,8]",
    );
    ok(
        fx.infer(
            Opcode::AllGather,
            &[x],
            &[dims(&[0])],
            Some(arr(F32, &[16, 8])),
        ),
        "f32[16,8]",
    );
    err(
        fx.infer(
            Opcode::AllGather,
            &[x],
            &[dims(&[0])],
            Some(arr(F32, &[6, 8])),
        ),
        "does not fit operand 0",
    );
    ok(
        fx.infer(
            Opcode::ReduceScatter,
            &[x],
            &[dims(&[1]), comp(AttrKey::ToApply, sum)],
            Some(arr(F32, &[4, 2])),
        ),
        "f32[4,2]",
    );
    ok(fx.infer(Opcode::AllToAll, &[x], &[], None), "f32[4,8]");
    let pairs = (
        AttrKey::SourceTargetPairs,
        AttrValue::Pairs(vec![[0, 1], [1, 0]].into()),
    );
    ok(
        fx.infer(Opcode::CollectivePermute, &[x], &[pairs], None),
        "f32[4,8]",
    );
    err(
        fx.infer(Opcode::CollectivePermute, &[x], &[], None),
        "missing attribute `source_target_pairs`",
    );
    let start = fx.p(OwnedShape::tuple(vec![
        arr(F32, &[4, 8]),
        arr(F32, &[16, 8]),
    ]));
    ok(
        fx.infer(Opcode::AllGatherDone, &[start], &[], None),
        "f32[16,8]",
    );
    ok(
        fx.infer(Opcode::CopyStart, &[x], &[], None),
        "(f32[4,8], f32[4,8], u32[])",
    );
}

/// Dynamic dimensions are carried through elementwise ops and reductions.
#[test]
fn dynamic_dimensions_are_carried() {
    let mut fx = Fx::new();
    let mut a = axle_ir::ArrayShape::new(F32, &[4, 8]);
    a.dynamic = vec![true, false].into();
    let x = fx.p(OwnedShape::Array(a));
    let y = fx.p(arr(F32, &[4, 8]));
    ok(fx.infer(Opcode::Add, &[x, y], &[], None), "f32[<=4,8]");
    ok(
        fx.infer(Opcode::Transpose, &[x], &[dims(&[1, 0])], None),
        "f32[8,<=4]",
    );
    let sum = fx.binop("sum", Opcode::Add, F32);
    let z = fx.p(sc(F32));
    ok(
        fx.infer(
            Opcode::Reduce,
            &[x, z],
            &[dims(&[1]), comp(AttrKey::ToApply, sum)],
            None,
        ),
        "f32[<=4]",
    );
    // Unbounded dynamic dimensions (`?`) are accepted and carried.
    let mut u = axle_ir::ArrayShape::new(F32, &[-1, 4]);
    u.dynamic = vec![true, false].into();
    let q = fx.p(OwnedShape::Array(u));
    ok(fx.infer(Opcode::Negate, &[q], &[], None), "f32[?,4]");
    let text = "HloModule m\n\nENTRY main {\n  x = f32[?,4]{1,0} parameter(0)\n  ROOT y = f32[?,4]{1,0} negate(x)\n}\n";
    let m = axle_ir::parse_module(text).expect("parses");
    assert_eq!(axle_ir::verify(&m), Ok(()));
}

/// Inference must return an error, never panic, on any combination of operands and attributes,
/// and what it returns is a valid shape.
#[test]
fn never_panics_on_garbage() {
    let shapes = [
        sc(F32),
        arr(F32, &[4, 8]),
        arr(S32, &[3]),
        arr(Pred, &[]),
        arr(C64, &[2, 2, 2]),
        arr(U8, &[0, 5]),
        arr(F32, &[i64::MAX, i64::MAX]),
        OwnedShape::tuple(vec![sc(F32), arr(S32, &[2])]),
        OwnedShape::Token,
        OwnedShape::Opaque,
        OwnedShape::Array(axle_ir::ArrayShape {
            ty: F32,
            dims: vec![-3].into(),
            dynamic: vec![false].into(),
        }),
    ];
    let w = |v: i64| {
        vec![
            WindowDim {
                size: v,
                stride: v,
                pad_lo: v,
                pad_hi: v,
                lhs_dilate: v,
                rhs_dilate: v,
                reversal: false,
            };
            2
        ]
    };
    let attr_sets: Vec<Vec<(AttrKey, AttrValue)>> = [-1i64, 0, 1, 2, i64::MAX, i64::MIN]
        .iter()
        .map(|&v| {
            vec![
                dims(&[v, 0]),
                int(AttrKey::Index, v),
                int(AttrKey::IndexVectorDim, v),
                int(AttrKey::IotaDimension, v),
                int(AttrKey::K, v),
                int(AttrKey::FeatureGroupCount, v),
                int(AttrKey::ExponentBits, v),
                int(AttrKey::MantissaBits, v),
                int(AttrKey::ParameterNumber, v),
                ints(AttrKey::LhsContractingDims, &[v]),
                ints(AttrKey::RhsContractingDims, &[v]),
                ints(AttrKey::LhsBatchDims, &[v]),
                ints(AttrKey::RhsBatchDims, &[0]),
                ints(AttrKey::OffsetDims, &[v]),
                ints(AttrKey::StartIndexMap, &[v]),
                ints(AttrKey::SliceSizes, &[v, v]),
                ints(AttrKey::UpdateWindowDims, &[v]),
                ints(AttrKey::ScatterDimsToOperandDims, &[v]),
                ints(AttrKey::DynamicSliceSizes, &[v, v]),
                ints(AttrKey::FftLength, &[v]),
                (AttrKey::FftType, AttrValue::Ident("IRFFT".into())),
                (
                    AttrKey::Slice,
                    AttrValue::Slice(vec![[v, v, v], [0, v, 1]].into()),
                ),
                (
                    AttrKey::Padding,
                    AttrValue::Padding(vec![[v, v, v], [v, 0, 0]].into()),
                ),
                (AttrKey::Window, AttrValue::Window(w(v).into())),
                (
                    AttrKey::DimLabels,
                    AttrValue::DimLabels(Box::new(ConvDims {
                        input_batch: v,
                        input_feature: 1,
                        input_spatial: vec![v, 2].into(),
                        kernel_input_feature: 0,
                        kernel_output_feature: v,
                        kernel_spatial: vec![2, 3].into(),
                        output_batch: 0,
                        output_feature: 1,
                        output_spatial: vec![2, v].into(),
                    })),
                ),
                (AttrKey::Other("feature_index".into()), AttrValue::Int(v)),
                (AttrKey::Distribution, AttrValue::Ident("rng_normal".into())),
                (AttrKey::ToApply, AttrValue::Comp(CompId::new(0))),
                (AttrKey::Calls, AttrValue::Comp(CompId::NONE)),
                (AttrKey::Kind, AttrValue::FusionKind(FusionKind::Loop)),
            ]
        })
        .collect();
    let sig = |c: CompId| -> Result<axle_ir::ProgramShape, axle_ir::ShapeError> {
        if c.index() == 0 {
            Ok(axle_ir::ProgramShape {
                name: "r".into(),
                params: vec![sc(F32), sc(F32)],
                result: sc(F32),
            })
        } else {
            Err(axle_ir::ShapeError::new("no such computation"))
        }
    };
    let mut n = 0;
    for &op in Opcode::ALL {
        for len in 0..5usize {
            for start in 0..shapes.len() {
                let operands: Vec<OwnedShape> = (0..len)
                    .map(|k| shapes[(start + k * 3) % shapes.len()].clone())
                    .collect();
                for attrs in attr_sets.iter().chain(std::iter::once(&Vec::new())) {
                    for declared in [None, Some(&shapes[1]), Some(&shapes[7]), Some(&shapes[10])] {
                        if let Ok(s) = infer_shape_from(op, &operands, attrs, declared, &sig) {
                            assert!(s.is_valid(), "{op} returned the invalid shape {s}");
                        }
                        n += 1;
                    }
                }
            }
        }
    }
    assert!(n > 10_000);
}

/// Element type predicates the inference relies on.
#[test]
fn element_type_classes() {
    assert!(ElementType::BF16.is_float());
    assert!(!ElementType::Pred.is_int());
    assert!(ElementType::C64.is_floating());
}
