//! The verifier: every invariant violated once and all of them reported together, messages and
//! rendering, and robustness on garbage modules.

use crate::fixtures::*;
use axle_ir::ElementType::*;
use axle_ir::{
    verify, ArrayLayout, ArrayLiteral, ArrayShape, AttrKey, AttrValue, CompId, ConstValue, Entity,
    FusionKind, InstId, Layout, LayoutId, Literal, Module, NewInst, Opcode, OwnedShape, ShapeId,
    SrcLoc,
};

/// `main(p0: f32[4]) -> add(p0, p0)`, valid.
fn small() -> (Fx, InstId, InstId) {
    let mut fx = Fx::new();
    let p = fx.p(arr(F32, &[4]));
    let main = fx.main;
    let a = fx.raw(main, Opcode::Add, &[p, p], vec![], &arr(F32, &[4]), "add");
    fx.m.set_root(main, a);
    (fx, p, a)
}

#[test]
fn valid_module_verifies() {
    let (fx, _, _) = small();
    assert_eq!(verify(&fx.m), Ok(()));
}

#[test]
fn every_invariant_violated_once_all_reported() {
    let mut fx = Fx::new();
    let main = fx.main;
    let f4 = arr(F32, &[4]);
    let p0 = fx.p(f4.clone());

    // 2. Bad parent, bad shape id, bad layout id, a layout that is no permutation.
    let shape = f4.intern(&mut fx.m);
    fx.m.push_inst(
        CompId::new(77),
        NewInst {
            opcode: Opcode::Negate,
            shape,
            layout: fx.m.no_layout(),
            operands: vec![],
            attrs: vec![],
            name: Some("orphan".into()),
        },
    );
    fx.m.push_inst(
        main,
        NewInst {
            opcode: Opcode::Negate,
            shape: ShapeId::new(9999),
            layout: fx.m.no_layout(),
            operands: vec![p0],
            attrs: vec![],
            name: Some("bad_shape".into()),
        },
    );
    fx.m.push_inst(
        main,
        NewInst {
            opcode: Opcode::Negate,
            shape,
            layout: LayoutId::new(9999),
            operands: vec![p0],
            attrs: vec![],
            name: Some("bad_layout_id".into()),
        },
    );
    let bad_layout = fx.m.intern_layout(Layout::Array(ArrayLayout {
        minor_to_major: vec![0, 0].into(),
        ..Default::default()
    }));
    fx.m.push_inst(
        main,
        NewInst {
            opcode: Opcode::Negate,
            shape,
            layout: bad_layout,
            operands: vec![p0],
            attrs: vec![],
            name: Some("bad_layout".into()),
        },
    );

    // 3. Operands: out of range, deleted, in another computation; a control predecessor in
    //    another computation.
    let other = fx.comp_with("other", std::slice::from_ref(&f4), |_, _, ps| ps[0]);
    let other_p = fx.m.params(other)[0];
    fx.raw(
        main,
        Opcode::Negate,
        &[InstId::new(100_000)],
        vec![],
        &f4,
        "dangling",
    );
    let dead = fx.raw(main, Opcode::Negate, &[p0], vec![], &f4, "dead");
    fx.m.remove_inst(dead);
    fx.raw(main, Opcode::Negate, &[dead], vec![], &f4, "uses_dead");
    fx.raw(main, Opcode::Negate, &[other_p], vec![], &f4, "cross");
    fx.raw(
        main,
        Opcode::Negate,
        &[p0],
        vec![(
            AttrKey::ControlPredecessors,
            AttrValue::Insts(vec![other_p].into()),
        )],
        &f4,
        "cross_control",
    );

    // 4. Calls a computation that does not exist; calls the entry.
    fx.raw(
        main,
        Opcode::Call,
        &[p0],
        vec![comp(AttrKey::ToApply, CompId::new(55))],
        &f4,
        "call_missing",
    );
    let call_entry = fx.comp_with("calls_entry", std::slice::from_ref(&f4), |fx, c, ps| {
        fx.raw(
            c,
            Opcode::Call,
            &[ps[0]],
            vec![comp(AttrKey::ToApply, CompId::new(0))],
            &f4,
            "call_entry",
        )
    });

    // 5. A computation without root; one whose root is in another computation.
    fx.m.add_computation("rootless");
    let foreign_root = fx.m.add_computation("foreign_root");
    fx.m.set_root(foreign_root, p0);

    // 6. Parameter gap and duplicate parameter numbers.
    let gappy = fx.m.add_computation("gappy");
    let g0 = fx.param_in(gappy, 0, &f4);
    fx.param_in(gappy, 2, &f4);
    fx.m.set_root(gappy, g0);
    let dup = fx.m.add_computation("dup");
    let d0 = fx.param_in(dup, 0, &f4);
    fx.raw(
        dup,
        Opcode::Parameter,
        &[],
        vec![int(AttrKey::ParameterNumber, 0)],
        &f4,
        "dup_param",
    );
    fx.m.set_root(dup, d0);

    // 7. Duplicate instruction and computation names.
    fx.raw(main, Opcode::Negate, &[p0], vec![], &f4, "twin");
    fx.raw(main, Opcode::Negate, &[p0], vec![], &f4, "twin");
    let twin_comp = fx.m.add_computation("other");
    let t0 = fx.raw(
        twin_comp,
        Opcode::Parameter,
        &[],
        vec![int(AttrKey::ParameterNumber, 0)],
        &f4,
        "twin_p",
    );
    fx.m.set_root(twin_comp, t0);

    // 8. A fusion computation also called by a call.
    let fused = fx.comp_with("fused", std::slice::from_ref(&f4), |fx, c, ps| {
        fx.raw(c, Opcode::Negate, &[ps[0]], vec![], &f4, "fused_neg")
    });
    let kind = (AttrKey::Kind, AttrValue::FusionKind(FusionKind::Loop));
    fx.raw(
        main,
        Opcode::Fusion,
        &[p0],
        vec![kind, comp(AttrKey::Calls, fused)],
        &f4,
        "fusion",
    );
    fx.raw(
        main,
        Opcode::Call,
        &[p0],
        vec![comp(AttrKey::ToApply, fused)],
        &f4,
        "call_fused",
    );

    // 9. A call cycle a -> b -> a.
    let ca = fx.m.add_computation("cyc_a");
    let cb = fx.m.add_computation("cyc_b");
    let a0 = fx.param_in(ca, 0, &f4);
    let ar = fx.raw(
        ca,
        Opcode::Call,
        &[a0],
        vec![comp(AttrKey::ToApply, cb)],
        &f4,
        "a_calls_b",
    );
    fx.m.set_root(ca, ar);
    let b0 = fx.param_in(cb, 0, &f4);
    let br = fx.raw(
        cb,
        Opcode::Call,
        &[b0],
        vec![comp(AttrKey::ToApply, ca)],
        &f4,
        "b_calls_a",
    );
    fx.m.set_root(cb, br);

    // 10. An instruction cycle x = add(p0, y), y = negate(x).
    let x = fx.raw(main, Opcode::Add, &[p0, p0], vec![], &f4, "cyc_x");
    let y = fx.raw(main, Opcode::Negate, &[x], vec![], &f4, "cyc_y");
    fx.m.set_operands(x, &[p0, y]);

    // 12. Declared shape differs from the inferred one.
    fx.raw(
        main,
        Opcode::Add,
        &[p0, p0],
        vec![],
        &arr(F32, &[5]),
        "wrong_shape",
    );
    // Shape inference errors are reported too.
    fx.raw(main, Opcode::And, &[p0, p0], vec![], &f4, "float_and");

    // 13. Constants: no value; a literal of the wrong shape.
    fx.raw(main, Opcode::Constant, &[], vec![], &f4, "no_value");
    let c = fx.raw(main, Opcode::Constant, &[], vec![], &f4, "wrong_literal");
    fx.m.set_constant(
        c,
        ConstValue::Literal(Literal::Array(ArrayLiteral::zeros(ArrayShape::new(
            F32,
            &[3],
        )))),
    );

    // 14. entry_computation_layout with the wrong parameter count and result shape.
    let s8 = arr(S32, &[8]).intern(&mut fx.m);
    let nl = fx.m.no_layout();
    fx.m.entry_layout = Some((vec![(s8, nl), (s8, nl)], (s8, nl)));

    let root = fx.raw(main, Opcode::Negate, &[p0], vec![], &f4, "root");
    fx.m.set_root(main, root);
    let _ = call_entry;

    let errs = verify(&fx.m).unwrap_err();
    let text = errs.to_string();
    let expect = [
        "error: %orphan: belongs to computation #77, which does not exist",
        "error: %bad_shape: has shape id 9999, which is not a shape of the module",
        "error: %bad_layout_id: has layout id 9999, which is not a layout of the module",
        "error: %bad_layout: layout {0,0} of shape f32[4] is not a permutation of 0..1",
        "error: %dangling: operand 0: #100000 does not exist",
        "error: %uses_dead: operand 0: %dead was deleted",
        "error: %cross: operand 0: %other.p0 is in computation %other, not %main",
        "error: %cross_control: control predecessor %other.p0 is in computation %other, not %main",
        "error: %call_missing: calls computation #55, which does not exist",
        "error: %call_entry: calls the entry computation %main",
        "error: computation %rootless: has no root instruction",
        "error: computation %foreign_root: root %main.p0 is in computation %main, not %foreign_root",
        "error: computation %gappy: has no parameter 1 (parameters must be numbered 0..3 without gaps)",
        "error: %dup_param: parameter number 0 is also used by %dup.p0",
        "error: %twin: name %twin is already used by another instruction",
        "error: computation %other: the name is already used by another computation",
        "error: %call_fused: calls %fused, which is the fusion computation of %fusion; fusion computations may only be called by fusions",
        "error: computation %cyc_a: calls itself: %cyc_a -> %cyc_b -> %cyc_a",
        "error: %cyc_x: depends on itself: %cyc_x -> %cyc_y -> %cyc_x",
        "error: %wrong_shape: add: declared shape f32[5] does not match the inferred shape f32[4]",
        "error: %float_and: and: operands must have a pred or integer element type, got f32",
        "error: %no_value: constant has no value",
        "error: %wrong_literal: constant: the literal has shape f32[3] but the instruction declares f32[4]",
        "error: entry_computation_layout has 2 parameters but the entry computation %main has 1",
        "error: entry_computation_layout result: shape s32[8] does not match %root f32[4]",
    ];
    let mut missing = Vec::new();
    for e in expect {
        if !text.lines().any(|l| l == e) {
            missing.push(e);
        }
    }
    assert!(missing.is_empty(), "missing {missing:#?}\nin:\n{text}");
    // Nothing else is reported: every error above is reported exactly once.
    assert_eq!(errs.len(), expect.len(), "{text}");
}

#[test]
fn module_without_entry() {
    let mut m = Module::new("m");
    let c = m.add_computation("c");
    let _ = c;
    let errs = verify(&m).unwrap_err();
    let text = errs.to_string();
    assert!(
        text.contains("error: the module has no entry computation"),
        "{text}"
    );
    assert!(
        text.contains("error: computation %c: has no root instruction"),
        "{text}"
    );
    m.set_entry(CompId::new(3));
    let text = verify(&m).unwrap_err().to_string();
    assert!(
        text.contains("error: the entry computation #3 does not exist"),
        "{text}"
    );
}

#[test]
fn errors_carry_source_locations_and_render() {
    let (mut fx, p, a) = small();
    let main = fx.main;
    let bad = fx.raw(
        main,
        Opcode::Multiply,
        &[p, p],
        vec![],
        &arr(F32, &[2]),
        "mul",
    );
    fx.m.set_root(main, bad);
    fx.m.set_src_loc(p, SrcLoc { line: 2, col: 3 });
    fx.m.set_src_loc(a, SrcLoc { line: 3, col: 3 });
    fx.m.set_src_loc(bad, SrcLoc { line: 4, col: 8 });
    fx.m.set_comp_src_loc(main, SrcLoc { line: 1, col: 1 });
    let errs = verify(&fx.m).unwrap_err();
    assert_eq!(
        errs.to_string(),
        "4:8: error: %mul: multiply: declared shape f32[2] does not match the inferred shape f32[4]"
    );
    assert_eq!(errs.errors[0].entity, Entity::Instruction(bad));
    assert_eq!(errs.for_entity(Entity::Instruction(bad)).count(), 1);

    let source = "ENTRY %main {\n  %main.p0 = f32[4]{0} parameter(0)\n  %add = f32[4]{0} add(%main.p0, %main.p0)\n  ROOT %mul = f32[2]{0} multiply(%main.p0, %main.p0)\n}\n";
    let shown = errs.annotate_source(source);
    assert!(
        shown.contains(
            "  ROOT %mul = f32[2]{0} multiply(%main.p0, %main.p0)\n       ^ error: %mul: multiply: declared shape"
        ),
        "{shown}"
    );

    let printed = errs.annotate(&fx.m);
    assert!(
        printed.contains(
            "  ROOT mul = f32[2]{0} multiply(main.p0, main.p0)\n  ^ error: %mul: multiply: declared"
        ),
        "{printed}"
    );

    // A module the printer cannot print (a shape id out of range) is shown in a simpler form.
    let p2 = fx.raw(main, Opcode::Negate, &[p], vec![], &arr(F32, &[4]), "neg");
    let nl = fx.m.no_layout();
    fx.m.set_shape(p2, ShapeId::new(999), nl);
    let errs = verify(&fx.m).unwrap_err();
    let printed = errs.annotate(&fx.m);
    assert!(
        printed.contains(
            "  %neg = <invalid shape> negate(%main.p0)\n  ^ error: %neg: has shape id 999"
        ),
        "{printed}"
    );
}

#[test]
fn tuple_layouts_and_entry_layout_agreement() {
    let (mut fx, p, _) = small();
    // A tuple instruction with a tuple layout of the wrong arity.
    let main = fx.main;
    let t = fx.raw(
        main,
        Opcode::Tuple,
        &[p, p],
        vec![],
        &OwnedShape::tuple(vec![arr(F32, &[4]), arr(F32, &[4])]),
        "t",
    );
    let l0 = fx.m.intern_layout(Layout::Array(ArrayLayout::row_major(1)));
    let bad = fx.m.intern_layout(Layout::Tuple(vec![l0].into()));
    let sid = fx.m.shape_id(t);
    fx.m.set_shape(t, sid, bad);
    // An entry layout that agrees on shapes but not on layouts.
    let col = fx.m.intern_layout(Layout::Array(ArrayLayout {
        minor_to_major: vec![0].into(),
        ..Default::default()
    }));
    let f4 = fx.m.shape_id(p);
    let m2 = fx.m.intern_shape(axle_ir::Shape::array(F32, &[2, 2]));
    fx.m.entry_layout = Some((vec![(f4, col)], (m2, fx.m.no_layout())));
    let text = verify(&fx.m).unwrap_err().to_string();
    assert!(
        text.contains("%t: tuple layout has 1 elements but shape (f32[4], f32[4]) has 2"),
        "{text}"
    );
    assert!(
        text.contains("entry_computation_layout result: shape f32[2,2] does not match %add f32[4]"),
        "{text}"
    );
}

/// An entry layout whose layouts differ from the instructions' is accepted (XLA's verifier
/// compares them only after layout assignment); its shapes must still agree.
#[test]
fn entry_layout_layouts_may_differ() {
    let mut fx = Fx::new();
    let main = fx.main;
    let p = fx.p(arr(F32, &[2, 3]));
    fx.m.set_root(main, p);
    let sid = fx.m.shape_id(p);
    let col_major = fx.m.intern_layout(Layout::Array(ArrayLayout {
        minor_to_major: vec![0, 1].into(),
        ..Default::default()
    }));
    let row = fx.m.layout_id(p);
    fx.m.entry_layout = Some((vec![(sid, col_major)], (sid, row)));
    verify(&fx.m).expect("differing entry layouts verify");
    let other = fx.m.intern_shape(axle_ir::Shape::array(F32, &[3, 2]));
    fx.m.entry_layout = Some((vec![(other, col_major)], (sid, row)));
    let text = verify(&fx.m).unwrap_err().to_string();
    assert!(
        text.contains("entry_computation_layout parameter 0: shape f32[3,2] does not match"),
        "{text}"
    );
}

/// A tiny deterministic generator, so the garbage test needs no dependency.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

/// The verifier reports, and never panics, on modules made of random ids and opcodes.
#[test]
fn never_panics_on_garbage_modules() {
    let mut rng = Lcg(42);
    for round in 0..300 {
        let mut m = Module::new("garbage");
        let n_comps = 1 + rng.next(4) as usize;
        for c in 0..n_comps {
            m.add_computation(&format!("c{}", rng.next(3) + c as u64 % 2));
        }
        let shapes = [
            m.intern_shape(axle_ir::Shape::array(F32, &[4])),
            m.intern_shape(axle_ir::Shape::array(S32, &[])),
            m.intern_shape(axle_ir::Shape::Token),
            m.intern_shape(axle_ir::Shape::Tuple(
                vec![ShapeId::new(0), ShapeId::new(500)].into(),
            )),
            m.intern_shape(axle_ir::Shape::Array(ArrayShape {
                ty: F32,
                dims: vec![2, -1].into(),
                dynamic: vec![false].into(),
            })),
        ];
        let layouts = [
            m.no_layout(),
            m.intern_layout(Layout::Array(ArrayLayout::row_major(1))),
            m.intern_layout(Layout::Tuple(
                vec![LayoutId::new(0), LayoutId::new(900)].into(),
            )),
        ];
        let n_insts = 1 + rng.next(30) as usize;
        for _ in 0..n_insts {
            let opcode = Opcode::ALL[rng.next(Opcode::ALL.len() as u64) as usize];
            let comp = if rng.next(10) == 0 {
                CompId::new(n_comps + 3)
            } else {
                CompId::new(rng.next(n_comps as u64) as usize)
            };
            if opcode == Opcode::Parameter && comp.index() >= n_comps {
                continue;
            }
            let n_ops = rng.next(4) as usize;
            let operands = (0..n_ops)
                .map(|_| InstId::new(rng.next(n_insts as u64 + 3) as usize))
                .collect();
            let mut attrs = Vec::new();
            match rng.next(6) {
                0 => attrs.push(int(AttrKey::ParameterNumber, rng.next(4) as i64 - 1)),
                1 => attrs.push(comp_attr(&mut rng, n_comps)),
                2 => attrs.push(dims(&[rng.next(3) as i64 - 1])),
                3 => attrs.push((
                    AttrKey::ControlPredecessors,
                    AttrValue::Insts(
                        vec![InstId::new(rng.next(n_insts as u64 + 2) as usize)].into(),
                    ),
                )),
                4 => attrs.push(int(AttrKey::Index, rng.next(3) as i64)),
                _ => {}
            }
            let id = m.push_inst(
                comp,
                NewInst {
                    opcode,
                    shape: if rng.next(20) == 0 {
                        ShapeId::new(1234)
                    } else {
                        shapes[rng.next(shapes.len() as u64) as usize]
                    },
                    layout: layouts[rng.next(layouts.len() as u64) as usize],
                    operands,
                    attrs,
                    name: Some(format!("i{}", rng.next(20))),
                },
            );
            if opcode == Opcode::Constant && rng.next(2) == 0 {
                m.set_constant(id, ConstValue::Literal(Literal::scalar_f64(F32, 1.0)));
            }
            if rng.next(8) == 0 {
                m.remove_inst(id);
            }
        }
        for c in 0..n_comps {
            let r = rng.next(n_insts as u64 + 2) as usize;
            if rng.next(5) != 0 {
                m.set_root(CompId::new(c), InstId::new(r));
            }
        }
        m.set_entry(CompId::new(rng.next(n_comps as u64 + 1) as usize));
        if round % 3 == 0 {
            m.entry_layout = Some((
                vec![(shapes[0], layouts[1])],
                (ShapeId::new(999), LayoutId::new(3)),
            ));
        }
        if let Err(e) = verify(&m) {
            let _ = e.to_string();
            let _ = e.annotate(&m);
            let _ = e.annotate_source("x\ny\n");
        }
    }
}

fn comp_attr(rng: &mut Lcg, n_comps: usize) -> (AttrKey, AttrValue) {
    let keys = [
        AttrKey::ToApply,
        AttrKey::Calls,
        AttrKey::Condition,
        AttrKey::Body,
    ];
    let k = keys[rng.next(keys.len() as u64) as usize].clone();
    (
        k,
        AttrValue::Comp(CompId::new(rng.next(n_comps as u64 + 1) as usize)),
    )
}

/// Every module the recipe generator builds verifies clean, before and after a print/parse round
/// trip.
#[test]
fn generated_modules_verify() {
    use quickcheck::{QuickCheck, TestResult};
    fn prop(r: axle_ir::gen::Recipe) -> TestResult {
        let m = r.build();
        if let Err(e) = verify(&m) {
            return TestResult::error(format!("{e}\n{}", axle_ir::print_module(&m)));
        }
        let text = axle_ir::print_module(&m);
        match axle_ir::parse_module(&text) {
            Ok(m2) => match verify(&m2) {
                Ok(()) => TestResult::passed(),
                Err(e) => TestResult::error(e.annotate_source(&text)),
            },
            Err(e) => TestResult::error(e.render("generated")),
        }
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(axle_ir::gen::Recipe) -> TestResult);
}
