//! Generated valid modules for property tests and fuzzing.
//!
//! A [`Recipe`] is a list of small steps; [`Recipe::build`] turns any recipe into a valid module
//! by skipping steps whose operands are not available. Shrinking a recipe (dropping steps,
//! shrinking numbers) therefore always yields a valid module, which is what quickcheck needs.
//!
//! Modules use a fixed family of shapes so that every step's operands can be found: `f32[4,8]`,
//! `f32[8,4]`, `f32[8]`, `f32[4]`, `f32[]`, `f32[32]`, `f32[2,8]`, `f32[4,4]`, `s32[4,8]`, `s32[]`
//! and `pred[4,8]`, and cover elementwise unary and binary ops, compare and select, broadcast,
//! reduce (with an `add` computation), transpose, reshape, slice, convert, constants, dot,
//! concatenate, iota, and a tuple root.
//!
//! [`Program`] (in [`program`]) is the wide generator: every element type, odd and zero-sized
//! shapes, the opcodes the evaluator runs, loops, conditionals, calls and maps. The fuzz targets
//! and campaigns draw from it; `Recipe` stays the small, fast family the unit properties use.

pub mod program;

pub use program::{Op, Program};

use quickcheck::{Arbitrary, Gen};

use crate::attrs::{AttrKey, AttrValue};
use crate::literal::{f64_to_element, ArrayLiteral, Literal};
use crate::module::{CompId, ConstValue, InstId, Module, NewInst, ShapeId};
use crate::opcode::Opcode;
use crate::types::{ArrayLayout, ArrayShape, ComparisonDirection, ElementType, Layout, Shape};

/// The shape classes a recipe works with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Class {
    /// `f32[4,8]`
    F48,
    /// `f32[8,4]`
    F84,
    /// `f32[8]`
    F8,
    /// `f32[4]`
    F4,
    /// `f32[]`
    F0,
    /// `f32[32]`
    F32,
    /// `f32[2,8]`
    F28,
    /// `f32[4,4]`
    F44,
    /// `s32[4,8]`
    I48,
    /// `s32[]`
    I0,
    /// `pred[4,8]`
    P48,
}

impl Class {
    const ALL: [Class; 11] = [
        Class::F48,
        Class::F84,
        Class::F8,
        Class::F4,
        Class::F0,
        Class::F32,
        Class::F28,
        Class::F44,
        Class::I48,
        Class::I0,
        Class::P48,
    ];

    /// The element type and dimensions of this class.
    pub fn shape(self) -> (ElementType, &'static [i64]) {
        use ElementType::*;
        match self {
            Class::F48 => (F32, &[4, 8]),
            Class::F84 => (F32, &[8, 4]),
            Class::F8 => (F32, &[8]),
            Class::F4 => (F32, &[4]),
            Class::F0 => (F32, &[]),
            Class::F32 => (F32, &[32]),
            Class::F28 => (F32, &[2, 8]),
            Class::F44 => (F32, &[4, 4]),
            Class::I48 => (S32, &[4, 8]),
            Class::I0 => (S32, &[]),
            Class::P48 => (Pred, &[4, 8]),
        }
    }
}

/// One step of a recipe: `kind` picks the operation, `a`, `b`, `c` pick operands and options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// Which operation.
    pub kind: u8,
    /// First operand choice.
    pub a: u8,
    /// Second operand choice.
    pub b: u8,
    /// Third operand or option choice.
    pub c: u8,
    /// Whether the instruction gets a name (unnamed ones get generated names when printed).
    pub named: bool,
}

/// A recipe for a valid module.
#[derive(Clone, Debug)]
pub struct Recipe {
    /// Classes of the entry parameters (at least one).
    pub params: Vec<u8>,
    /// The steps.
    pub steps: Vec<Step>,
    /// How many of the last values the root tuple returns (at least one).
    pub outputs: u8,
}

impl Arbitrary for Step {
    fn arbitrary(g: &mut Gen) -> Self {
        Step {
            kind: u8::arbitrary(g),
            a: u8::arbitrary(g),
            b: u8::arbitrary(g),
            c: u8::arbitrary(g),
            named: bool::arbitrary(g),
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        let s = *self;
        Box::new(
            s.a.shrink()
                .map(move |a| Step { a, ..s })
                .chain(s.b.shrink().map(move |b| Step { b, ..s }))
                .chain((!s.named).then_some(Step { named: true, ..s })),
        )
    }
}

impl Arbitrary for Recipe {
    fn arbitrary(g: &mut Gen) -> Self {
        let np = 1 + usize::arbitrary(g) % 3;
        let params = (0..np).map(|_| u8::arbitrary(g)).collect();
        let ns = usize::arbitrary(g) % (g.size() + 1);
        let steps = (0..ns).map(|_| Step::arbitrary(g)).collect();
        Recipe {
            params,
            steps,
            outputs: 1 + u8::arbitrary(g) % 4,
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        let this = self.clone();
        let that = self.clone();
        Box::new(
            self.steps
                .shrink()
                .map(move |steps| Recipe {
                    steps,
                    ..this.clone()
                })
                .chain(
                    self.params
                        .shrink()
                        .filter(|p| !p.is_empty())
                        .map(move |params| Recipe {
                            params,
                            ..that.clone()
                        }),
                )
                .take(64),
        )
    }
}

struct Builder {
    m: Module,
    entry: CompId,
    add_comp: Option<CompId>,
    values: Vec<(Class, InstId)>,
    counter: usize,
}

impl Builder {
    fn shape(&mut self, c: Class) -> (ShapeId, crate::LayoutId) {
        let (ty, dims) = c.shape();
        let s = self.m.intern_shape(Shape::Array(ArrayShape::new(ty, dims)));
        let l = self
            .m
            .intern_layout(Layout::Array(ArrayLayout::row_major(dims.len())));
        (s, l)
    }

    fn pick(&self, class: Class, k: u8) -> Option<InstId> {
        let v: Vec<InstId> = self
            .values
            .iter()
            .filter(|(c, _)| *c == class)
            .map(|(_, i)| *i)
            .collect();
        (!v.is_empty()).then(|| v[k as usize % v.len()])
    }

    fn pick_any(&self, k: u8, pred: impl Fn(Class) -> bool) -> Option<(Class, InstId)> {
        let v: Vec<(Class, InstId)> = self
            .values
            .iter()
            .copied()
            .filter(|(c, _)| pred(*c))
            .collect();
        (!v.is_empty()).then(|| v[k as usize % v.len()])
    }

    fn push(
        &mut self,
        class: Class,
        opcode: Opcode,
        operands: Vec<InstId>,
        attrs: Vec<(AttrKey, AttrValue)>,
        named: bool,
    ) -> InstId {
        let (shape, layout) = self.shape(class);
        self.counter += 1;
        let name = named.then(|| format!("v{}", self.counter));
        let id = self.m.push_inst(
            self.entry,
            NewInst {
                opcode,
                shape,
                layout,
                operands,
                attrs,
                name,
            },
        );
        self.values.push((class, id));
        id
    }

    fn add_computation(&mut self) -> CompId {
        if let Some(c) = self.add_comp {
            return c;
        }
        let c = self.m.add_computation("add_f32");
        let (s, l) = self.shape(Class::F0);
        let mk = |m: &mut Module, op, ops: Vec<InstId>, attrs, name: &str| {
            m.push_inst(
                c,
                NewInst {
                    opcode: op,
                    shape: s,
                    layout: l,
                    operands: ops,
                    attrs,
                    name: Some(name.into()),
                },
            )
        };
        let x = mk(
            &mut self.m,
            Opcode::Parameter,
            vec![],
            vec![(AttrKey::ParameterNumber, AttrValue::Int(0))],
            "add_x",
        );
        let y = mk(
            &mut self.m,
            Opcode::Parameter,
            vec![],
            vec![(AttrKey::ParameterNumber, AttrValue::Int(1))],
            "add_y",
        );
        let r = mk(&mut self.m, Opcode::Add, vec![x, y], vec![], "add_r");
        self.m.set_root(c, r);
        self.add_comp = Some(c);
        c
    }
}

fn dims(v: &[i64]) -> AttrValue {
    AttrValue::Ints(v.into())
}

impl Recipe {
    /// Builds the module this recipe describes. Always valid.
    pub fn build(&self) -> Module {
        let mut m = Module::new("generated");
        let entry = m.add_computation("main");
        m.set_entry(entry);
        let mut b = Builder {
            m,
            entry,
            add_comp: None,
            values: Vec::new(),
            counter: 0,
        };
        let params = if self.params.is_empty() {
            vec![0]
        } else {
            self.params.clone()
        };
        for (i, p) in params.iter().enumerate() {
            let class = Class::ALL[*p as usize % Class::ALL.len()];
            b.push(
                class,
                Opcode::Parameter,
                vec![],
                vec![(AttrKey::ParameterNumber, AttrValue::Int(i as i64))],
                true,
            );
        }
        for s in &self.steps {
            self.step(&mut b, s);
        }
        let n = (self.outputs.max(1) as usize).min(b.values.len());
        let outs: Vec<(Class, InstId)> = b.values[b.values.len() - n..].to_vec();
        let shapes: Vec<ShapeId> = outs.iter().map(|(c, _)| b.shape(*c).0).collect();
        let layouts: Vec<crate::LayoutId> = outs.iter().map(|(c, _)| b.shape(*c).1).collect();
        let ts = b.m.intern_shape(Shape::Tuple(shapes.into()));
        let tl = b.m.intern_layout(Layout::Tuple(layouts.into()));
        let root = b.m.push_inst(
            entry,
            NewInst {
                opcode: Opcode::Tuple,
                shape: ts,
                layout: tl,
                operands: outs.iter().map(|(_, i)| *i).collect(),
                attrs: vec![],
                name: Some("result".into()),
            },
        );
        b.m.set_root(entry, root);
        b.m
    }

    fn step(&self, b: &mut Builder, s: &Step) {
        use Class::*;
        let is_f = |c: Class| !matches!(c, I48 | I0 | P48);
        match s.kind % 16 {
            0 => {
                // Elementwise unary on any float value.
                if let Some((c, x)) = b.pick_any(s.a, is_f) {
                    let ops = [
                        Opcode::Negate,
                        Opcode::Exp,
                        Opcode::Tanh,
                        Opcode::Abs,
                        Opcode::Floor,
                        Opcode::Sqrt,
                        Opcode::Sin,
                        Opcode::Log,
                    ];
                    b.push(c, ops[s.c as usize % ops.len()], vec![x], vec![], s.named);
                }
            }
            1 | 2 => {
                // Elementwise binary on two values of one float class.
                if let Some((c, x)) = b.pick_any(s.a, is_f) {
                    let y = b.pick(c, s.b).unwrap_or(x);
                    let ops = [
                        Opcode::Add,
                        Opcode::Subtract,
                        Opcode::Multiply,
                        Opcode::Maximum,
                        Opcode::Minimum,
                        Opcode::Divide,
                    ];
                    b.push(
                        c,
                        ops[s.c as usize % ops.len()],
                        vec![x, y],
                        vec![],
                        s.named,
                    );
                }
            }
            3 => {
                // Integer binary.
                if let Some((c, x)) = b.pick_any(s.a, |c| matches!(c, I48 | I0)) {
                    let y = b.pick(c, s.b).unwrap_or(x);
                    let ops = [
                        Opcode::Add,
                        Opcode::Multiply,
                        Opcode::MulHi,
                        Opcode::Subtract,
                        Opcode::And,
                        Opcode::Or,
                        Opcode::Xor,
                        Opcode::ShiftLeft,
                        Opcode::Maximum,
                    ];
                    b.push(
                        c,
                        ops[s.c as usize % ops.len()],
                        vec![x, y],
                        vec![],
                        s.named,
                    );
                }
            }
            4 => {
                // Compare two f32[4,8] values, then select.
                if let (Some(x), Some(y)) = (b.pick(F48, s.a), b.pick(F48, s.b)) {
                    let dirs = [
                        ComparisonDirection::Lt,
                        ComparisonDirection::Ge,
                        ComparisonDirection::Eq,
                        ComparisonDirection::Ne,
                    ];
                    let p = b.push(
                        P48,
                        Opcode::Compare,
                        vec![x, y],
                        vec![(
                            AttrKey::Direction,
                            AttrValue::Direction(dirs[s.c as usize % 4]),
                        )],
                        s.named,
                    );
                    b.push(F48, Opcode::Select, vec![p, x, y], vec![], s.named);
                }
            }
            5 => {
                // Broadcast a scalar, a row, or a column (one value per row, as a reduction's
                // result is read back).
                if s.c % 3 == 2 {
                    if let Some(x) = b.pick(F4, s.a) {
                        b.push(
                            F48,
                            Opcode::Broadcast,
                            vec![x],
                            vec![(AttrKey::Dimensions, dims(&[0]))],
                            s.named,
                        );
                    }
                } else if s.c.is_multiple_of(2) {
                    if let Some(x) = b.pick(F0, s.a) {
                        b.push(
                            F48,
                            Opcode::Broadcast,
                            vec![x],
                            vec![(AttrKey::Dimensions, dims(&[]))],
                            s.named,
                        );
                    }
                } else if let Some(x) = b.pick(F8, s.a) {
                    b.push(
                        F48,
                        Opcode::Broadcast,
                        vec![x],
                        vec![(AttrKey::Dimensions, dims(&[1]))],
                        s.named,
                    );
                }
            }
            6 => {
                // Reduce f32[4,8] over one or both dimensions.
                if let Some(x) = b.pick(F48, s.a) {
                    let add = b.add_computation();
                    let z = b.push(F0, Opcode::Constant, vec![], vec![], false);
                    let zl = Literal::Array(ArrayLiteral {
                        shape: ArrayShape::new(ElementType::F32, &[]),
                        data: f64_to_element(ElementType::F32, 0.0),
                    });
                    b.m.set_constant(z, ConstValue::Literal(zl));
                    let (class, d): (Class, &[i64]) = match s.c % 3 {
                        0 => (F4, &[1]),
                        1 => (F8, &[0]),
                        _ => (F0, &[0, 1]),
                    };
                    b.push(
                        class,
                        Opcode::Reduce,
                        vec![x, z],
                        vec![
                            (AttrKey::Dimensions, dims(d)),
                            (AttrKey::ToApply, AttrValue::Comp(add)),
                        ],
                        s.named,
                    );
                }
            }
            7 => {
                if let Some(x) = b.pick(F48, s.a) {
                    b.push(
                        F84,
                        Opcode::Transpose,
                        vec![x],
                        vec![(AttrKey::Dimensions, dims(&[1, 0]))],
                        s.named,
                    );
                } else if let Some(x) = b.pick(F84, s.a) {
                    b.push(
                        F48,
                        Opcode::Transpose,
                        vec![x],
                        vec![(AttrKey::Dimensions, dims(&[1, 0]))],
                        s.named,
                    );
                }
            }
            8 => {
                if let Some(x) = b.pick(F48, s.a) {
                    b.push(F32, Opcode::Reshape, vec![x], vec![], s.named);
                } else if let Some(x) = b.pick(F32, s.a) {
                    b.push(F48, Opcode::Reshape, vec![x], vec![], s.named);
                }
            }
            9 => {
                if let Some(x) = b.pick(F48, s.a) {
                    let lo = (s.c % 3) as i64;
                    b.push(
                        F28,
                        Opcode::Slice,
                        vec![x],
                        vec![(
                            AttrKey::Slice,
                            AttrValue::Slice(vec![[lo, lo + 2, 1], [0, 8, 1]].into()),
                        )],
                        s.named,
                    );
                }
            }
            10 => {
                // Converts between f32 and s32.
                if s.c.is_multiple_of(2) {
                    if let Some(x) = b.pick(F48, s.a) {
                        b.push(I48, Opcode::Convert, vec![x], vec![], s.named);
                    }
                } else if let Some(x) = b.pick(I48, s.a) {
                    b.push(F48, Opcode::Convert, vec![x], vec![], s.named);
                }
            }
            11 => {
                // A scalar constant.
                let (class, ty) = if s.c.is_multiple_of(2) {
                    (F0, ElementType::F32)
                } else {
                    (I0, ElementType::S32)
                };
                let v = (s.a as f64 - 128.0) / 4.0;
                let z = b.push(class, Opcode::Constant, vec![], vec![], s.named);
                let l = Literal::Array(ArrayLiteral {
                    shape: ArrayShape::new(ty, &[]),
                    data: f64_to_element(ty, v),
                });
                b.m.set_constant(z, ConstValue::Literal(l));
            }
            12 => {
                // dot f32[4,8] x f32[8,4] -> f32[4,4].
                if let (Some(x), Some(y)) = (b.pick(F48, s.a), b.pick(F84, s.b)) {
                    b.push(
                        F44,
                        Opcode::Dot,
                        vec![x, y],
                        vec![
                            (AttrKey::LhsContractingDims, dims(&[1])),
                            (AttrKey::RhsContractingDims, dims(&[0])),
                        ],
                        s.named,
                    );
                }
            }
            13 => {
                // concatenate two f32[2,8] along 0 -> f32[4,8].
                if let Some(x) = b.pick(F28, s.a) {
                    let y = b.pick(F28, s.b).unwrap_or(x);
                    b.push(
                        F48,
                        Opcode::Concatenate,
                        vec![x, y],
                        vec![(AttrKey::Dimensions, dims(&[0]))],
                        s.named,
                    );
                }
            }
            14 => {
                let d = (s.c % 2) as i64;
                b.push(
                    I48,
                    Opcode::Iota,
                    vec![],
                    vec![(AttrKey::IotaDimension, AttrValue::Int(d))],
                    s.named,
                );
            }
            _ => {
                // Broadcast a scalar int, or reduce-free copy of anything.
                if let Some((c, x)) = b.pick_any(s.a, |_| true) {
                    b.push(c, Opcode::Copy, vec![x], vec![], s.named);
                }
            }
        }
    }
}
