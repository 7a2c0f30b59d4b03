//! The builder: an MLP-like module, control flow, and errors as values.

use axle_ir::builder::{BuildError, DotDims, ModuleBuilder};
use axle_ir::ElementType::*;
use axle_ir::{
    verify, ArrayLiteral, ArrayShape, ComparisonDirection, Layout, Literal, Opcode, OwnedShape,
    Shape,
};

/// `softmax(relu(x @ w1 + b1) @ w2 + b2)` and the mean loss, as a tuple.
#[test]
fn mlp_module_builds_and_verifies() -> Result<(), BuildError> {
    let mut b = ModuleBuilder::new("mlp");
    let sum = b.scalar_reducer("sum", Opcode::Add, F32)?;
    let max = b.scalar_reducer("max", Opcode::Maximum, F32)?;
    let mut c = b.computation("main");
    let x = c.parameter(0, Shape::array(F32, &[8, 32]), "x")?;
    let w1 = c.parameter(1, Shape::array(F32, &[32, 64]), "w1")?;
    let b1 = c.parameter(2, Shape::array(F32, &[64]), "b1")?;
    let w2 = c.parameter(3, ArrayShape::new(F32, &[64, 10]), "w2")?;
    let b2 = c.parameter(4, OwnedShape::array(F32, &[10]), "b2")?;
    let h = c.matmul(x, w1)?;
    let bb1 = c.broadcast(b1, &[8, 64], &[1])?;
    let h = c.add(h, bb1)?;
    let zero = c.constant_scalar(F32, 0.0)?;
    let zeros = c.broadcast(zero, &[8, 64], &[])?;
    let h = c.maximum(h, zeros)?;
    let logits = c.dot(h, w2, &DotDims::contracting(1, 0))?;
    let bb2 = c.broadcast(b2, &[8, 10], &[1])?;
    let logits = c.add(logits, bb2)?;
    let ninf = c.constant_scalar(F32, f64::NEG_INFINITY)?;
    let mx = c.reduce(&[logits], &[ninf], &[1], max)?;
    let mxb = c.broadcast(mx, &[8, 10], &[0])?;
    let shifted = c.subtract(logits, mxb)?;
    let e = c.exp(shifted)?;
    let s = c.reduce(&[e], &[zero], &[1], sum)?;
    let sb = c.broadcast(s, &[8, 10], &[0])?;
    let probs = c.divide(e, sb)?;
    let total = c.reduce(&[probs], &[zero], &[0, 1], sum)?;
    let n = c.constant_scalar(F32, 80.0)?;
    let mean = c.divide(total, n)?;
    let out = c.tuple(&[probs, mean])?;
    let main = c.finish(out)?;
    b.entry(main);
    let m = b.build()?;

    assert_eq!(verify(&m), Ok(()));
    let root = m.root(m.entry());
    assert_eq!(
        OwnedShape::from_id(&m, m.shape_id(root))
            .unwrap()
            .to_string(),
        "(f32[8,10], f32[])"
    );
    // Arrays get row-major layouts, scalars none; names are unique and generated.
    assert!(
        matches!(m.layout_of(m.layout_id(probs)), Layout::Array(l) if l.minor_to_major[..] == [1, 0])
    );
    assert_eq!(m.layout_of(m.layout_id(mean)), &Layout::None);
    assert_eq!(m.name(x), "x");
    assert!(m.name(h).starts_with("maximum."));
    assert_eq!(m.params(main).len(), 5);
    round_trips(&m);
    Ok(())
}

/// The printed module parses back to a module that prints the same and verifies.
fn round_trips(m: &axle_ir::Module) {
    let text = axle_ir::print_module(m);
    let back = match axle_ir::parse_module(&text) {
        Ok(b) => b,
        Err(e) => panic!("{}\n{text}", e.render("built")),
    };
    assert_eq!(axle_ir::print_module(&back), text);
    assert_eq!(verify(&back), Ok(()), "{text}");
    for i in back.live_ids() {
        let orig = m.live_ids()[i.index()];
        assert_eq!(
            m.layout_of(m.layout_id(orig)),
            back.layout_of(back.layout_id(i)),
            "{}",
            m.name(orig)
        );
    }
}

#[test]
fn control_flow_and_sort() -> Result<(), BuildError> {
    let mut b = ModuleBuilder::new("loops");
    let state = OwnedShape::tuple(vec![OwnedShape::scalar(S32), OwnedShape::array(F32, &[4])]);

    let mut cond = b.computation("cond");
    let p = cond.parameter(0, state.clone(), "s")?;
    let i = cond.get_tuple_element(p, 0)?;
    let ten = cond.constant_scalar(S32, 10.0)?;
    let lt = cond.compare(i, ten, ComparisonDirection::Lt)?;
    let cond = cond.finish(lt)?;

    let mut body = b.computation("body");
    let p = body.parameter(0, state.clone(), "s")?;
    let i = body.get_tuple_element(p, 0)?;
    let v = body.get_tuple_element(p, 1)?;
    let one = body.constant_scalar(S32, 1.0)?;
    let i = body.add(i, one)?;
    let v = body.tanh(v)?;
    let t = body.tuple(&[i, v])?;
    let body = body.finish(t)?;

    let mut neg = b.computation("neg");
    let p = neg.parameter(0, Shape::array(F32, &[4]), "v")?;
    let r = neg.negate(p)?;
    let neg = neg.finish(r)?;
    let mut id = b.computation("id");
    let p = id.parameter(0, Shape::array(F32, &[4]), "v")?;
    let id = id.finish(p)?;

    let lt = b.comparator("lt", F32, ComparisonDirection::Lt)?;

    let mut c = b.computation("main");
    let v = c.parameter(0, Shape::array(F32, &[4]), "v")?;
    let k = c.parameter(1, Shape::scalar_pred(), "k")?;
    let zero = c.constant_scalar(S32, 0.0)?;
    let init = c.tuple(&[zero, v])?;
    let w = c.while_loop(cond, body, init)?;
    let r = c.get_tuple_element(w, 1)?;
    let r = c.conditional(k, &[neg, id], &[r, r])?;
    let r = c.call(neg, &[r])?;
    let r = c.sort(&[r], 0, lt, true)?;
    let iota = c.iota(S32, &[4], 0)?;
    let fi = c.convert(iota, F32)?;
    let r = c.add(r, fi)?;
    let r2 = c.reshape(r, &[2, 2])?;
    let r2 = c.transpose(r2, &[1, 0])?;
    let s = c.slice(r2, &[0, 0], &[2, 1], &[1, 1])?;
    let cat = c.concatenate(&[s, s], 1)?;
    let pad0 = c.constant_scalar(F32, 0.0)?;
    let padded = c.pad(cat, pad0, &[(1, 0, 0), (0, 1, 1)])?;
    let bits = c.bitcast_convert(padded, U8)?;
    let lit = c.constant(Literal::Array(ArrayLiteral::zeros(ArrayShape::new(
        S32,
        &[3],
    ))))?;
    let out = c.tuple(&[bits, lit])?;
    let main = c.finish(out)?;
    b.entry(main);
    let m = b.build()?;
    assert_eq!(
        OwnedShape::from_id(&m, m.shape_id(m.root(main)))
            .unwrap()
            .to_string(),
        "(u8[3,4,4], s32[3])"
    );
    round_trips(&m);
    Ok(())
}

/// A small extension used by the test above.
trait ScalarPred {
    fn scalar_pred() -> Shape;
}

impl ScalarPred for Shape {
    fn scalar_pred() -> Shape {
        Shape::array(Pred, &[])
    }
}

#[test]
fn errors_are_values() -> Result<(), BuildError> {
    let mut b = ModuleBuilder::new("bad");
    let mut other = b.computation("other");
    let o = other.parameter(0, Shape::array(F32, &[8]), "o")?;
    let other_id = other.finish(o)?;

    let mut c = b.computation("main");
    let x = c.parameter(0, Shape::array(F32, &[8]), "x")?;
    let y = c.parameter(1, Shape::array(F32, &[4]), "y")?;
    let e = c.add(x, y).unwrap_err();
    assert_eq!(
        e.to_string(),
        "in computation %main: add: operand 1 has shape f32[4] but operand 0 has f32[8]"
    );
    assert!(matches!(
        e,
        BuildError::Inst {
            opcode: Opcode::Add,
            ..
        }
    ));
    let e = c.add(x, o).unwrap_err();
    assert!(
        e.to_string()
            .contains("add: operand 1 (#0) is not an instruction of this computation"),
        "{e}"
    );
    let e = c.reshape(x, &[3, 3]).unwrap_err();
    assert!(
        e.to_string()
            .contains("cannot reshape f32[8] (8 elements) to f32[3,3] (9 elements)"),
        "{e}"
    );
    let e = c.call(other_id, &[y]).unwrap_err();
    assert!(
        e.to_string().contains(
            "call: operand 0 has shape f32[4] but parameter 0 of computation %other has f32[8]"
        ),
        "{e}"
    );
    let e = c.op(Opcode::CustomCall, &[x], vec![], None).unwrap_err();
    assert!(
        e.to_string()
            .contains("custom-call: the result shape cannot be inferred and must be given"),
        "{e}"
    );
    let cc = c.op_shaped(Opcode::CustomCall, &[x], vec![], Shape::array(S32, &[2]))?;
    let main = c.finish(cc)?;
    let e = ModuleBuilder::new("no_entry").build().unwrap_err();
    assert!(matches!(e, BuildError::Invalid(_)), "{e}");

    // The entry is `other`, which is fine; the root of a computation must be its own.
    let mut c2 = b.computation("third");
    let z = c2.parameter(0, Shape::array(F32, &[1]), "z")?;
    let _ = z;
    let e = c2.finish(cc).unwrap_err();
    assert!(
        e.to_string().contains("is not one of its instructions"),
        "{e}"
    );
    b.entry(main);
    // `third` has no root: build reports it through the verifier.
    match b.build() {
        Err(BuildError::Verify(errs)) => {
            assert_eq!(
                errs.to_string(),
                "error: computation %third: has no root instruction"
            )
        }
        other => panic!("expected a verifier error, got {other:?}"),
    }
    Ok(())
}

#[test]
fn dot_with_preferred_type() -> Result<(), BuildError> {
    let mut b = ModuleBuilder::new("bf16");
    let mut c = b.computation("main");
    let x = c.parameter(0, Shape::array(BF16, &[2, 3, 4]), "x")?;
    let w = c.parameter(1, Shape::array(BF16, &[2, 4, 5]), "w")?;
    let dims = DotDims {
        lhs_batch: vec![0],
        rhs_batch: vec![0],
        lhs_contracting: vec![2],
        rhs_contracting: vec![1],
    };
    let y = c.dot_as(x, w, &dims, F32)?;
    let main = c.finish(y)?;
    b.entry(main);
    let m = b.build()?;
    assert_eq!(
        OwnedShape::from_id(&m, m.shape_id(y)).unwrap().to_string(),
        "f32[2,3,5]"
    );
    Ok(())
}
