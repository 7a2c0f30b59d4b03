//! Fixtures shared by the shape inference, verifier and builder tests.
#![allow(dead_code)]

use axle_ir::shape_inference::ShapeError;
use axle_ir::{
    infer_shape, Attr, AttrKey, AttrValue, CompId, ElementType, InstId, Module, NewInst, Opcode,
    OwnedShape,
};

/// An array shape.
pub fn arr(ty: ElementType, dims: &[i64]) -> OwnedShape {
    OwnedShape::array(ty, dims)
}

/// A scalar shape.
pub fn sc(ty: ElementType) -> OwnedShape {
    OwnedShape::scalar(ty)
}

/// `dimensions={...}`.
pub fn dims(d: &[i64]) -> Attr {
    (AttrKey::Dimensions, AttrValue::Ints(d.into()))
}

/// An integer-list attribute.
pub fn ints(k: AttrKey, d: &[i64]) -> Attr {
    (k, AttrValue::Ints(d.into()))
}

/// An integer attribute.
pub fn int(k: AttrKey, v: i64) -> Attr {
    (k, AttrValue::Int(v))
}

/// A computation attribute.
pub fn comp(k: AttrKey, c: CompId) -> Attr {
    (k, AttrValue::Comp(c))
}

/// A module under construction with raw `push_inst`, for inference and verifier tests.
pub struct Fx {
    pub m: Module,
    pub main: CompId,
    next_param: i64,
}

impl Default for Fx {
    fn default() -> Self {
        Self::new()
    }
}

impl Fx {
    pub fn new() -> Fx {
        let mut m = Module::new("test");
        let main = m.add_computation("main");
        m.set_entry(main);
        Fx {
            m,
            main,
            next_param: 0,
        }
    }

    /// Pushes an instruction without any checking.
    pub fn raw(
        &mut self,
        c: CompId,
        opcode: Opcode,
        operands: &[InstId],
        attrs: Vec<Attr>,
        shape: &OwnedShape,
        name: &str,
    ) -> InstId {
        let layout = axle_ir::builder::default_layout(&mut self.m, shape);
        let shape = shape.intern(&mut self.m);
        self.m.push_inst(
            c,
            NewInst {
                opcode,
                shape,
                layout,
                operands: operands.to_vec(),
                attrs,
                name: Some(name.to_string()),
            },
        )
    }

    /// A parameter of `main` with the next parameter number.
    pub fn p(&mut self, s: OwnedShape) -> InstId {
        let n = self.next_param;
        self.next_param += 1;
        let main = self.main;
        self.param_in(main, n, &s)
    }

    /// Parameter `n` of computation `c`.
    pub fn param_in(&mut self, c: CompId, n: i64, s: &OwnedShape) -> InstId {
        let name = format!("{}.p{n}", self.m.comp_name(c));
        self.raw(
            c,
            Opcode::Parameter,
            &[],
            vec![int(AttrKey::ParameterNumber, n)],
            s,
            &name,
        )
    }

    /// A computation with the given parameters whose root is built by `f` from them.
    pub fn comp_with(
        &mut self,
        name: &str,
        params: &[OwnedShape],
        f: impl FnOnce(&mut Fx, CompId, &[InstId]) -> InstId,
    ) -> CompId {
        let c = self.m.add_computation(name);
        let ps: Vec<InstId> = params
            .iter()
            .enumerate()
            .map(|(i, s)| self.param_in(c, i as i64, s))
            .collect();
        let root = f(self, c, &ps);
        self.m.set_root(c, root);
        c
    }

    /// `(a: T[], b: T[]) -> op(a, b)`.
    pub fn binop(&mut self, name: &str, op: Opcode, ty: ElementType) -> CompId {
        let rname = format!("{name}.r");
        let out = if op == Opcode::Compare {
            sc(ElementType::Pred)
        } else {
            sc(ty)
        };
        self.comp_with(name, &[sc(ty), sc(ty)], move |fx, c, ps| {
            let attrs = if op == Opcode::Compare {
                vec![(
                    AttrKey::Direction,
                    AttrValue::Direction(axle_ir::ComparisonDirection::Lt),
                )]
            } else {
                Vec::new()
            };
            fx.raw(c, op, &[ps[0], ps[1]], attrs, &out, &rname)
        })
    }

    /// Infers a shape in this module.
    pub fn infer(
        &self,
        op: Opcode,
        operands: &[InstId],
        attrs: &[Attr],
        declared: Option<OwnedShape>,
    ) -> Result<OwnedShape, ShapeError> {
        infer_shape(&self.m, op, operands, attrs, declared.as_ref())
    }
}

/// Asserts inference succeeded with the given shape text.
#[track_caller]
pub fn ok(r: Result<OwnedShape, ShapeError>, want: &str) {
    match r {
        Ok(s) => assert_eq!(s.to_string(), want),
        Err(e) => panic!("expected {want}, got error: {e}"),
    }
}

/// Asserts inference failed with a message containing `want`.
#[track_caller]
pub fn err(r: Result<OwnedShape, ShapeError>, want: &str) {
    match r {
        Ok(s) => panic!("expected an error containing {want:?}, got {s}"),
        Err(e) => assert!(
            e.message().contains(want),
            "error {:?} does not contain {want:?}",
            e.message()
        ),
    }
}
