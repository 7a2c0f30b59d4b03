//! [`Program`]: recipes for valid modules over every element type, odd and zero-sized shapes,
//! and the opcodes the reference evaluator runs, with while loops, conditionals, calls and maps.
//!
//! A program is a list of [`Op`]s; [`Program::build`] turns any program into a valid module.
//! Each op names what to build (`kind`) and four choice bytes (`a`..`d`) that pick operands,
//! shapes, types and attributes from what is available. Every instruction goes through
//! [`infer_shape`]: an op whose operands or attributes do not fit is skipped, so dropping ops or
//! shrinking bytes (what quickcheck's shrinking and a fuzzer's mutations do) always leaves a valid
//! module. Ops that call computations (`while`, `conditional`, `call`, `map`) carry a `body` of
//! ops built into the called computation, nested at most [`MAX_DEPTH`] deep.
//!
//! Invariants of a built module: it verifies; every computation it holds is called (or is the
//! entry); the entry's root is a tuple of one to four array values; loops run a bounded number of
//! times (a counter compared against a constant below 4); nothing reads outside its operands
//! (dynamic indices and gather/scatter indices are clamped by the ops' own semantics).
//!
//! [`Program::from_bytes`] decodes a program from raw bytes (fuzzers and seeded campaigns), and
//! [`quickcheck::Arbitrary`] generates and shrinks programs for property tests.

use arbitrary::Unstructured;
use hashbrown::HashMap;
use quickcheck::{Arbitrary, Gen};

use crate::attrs::{Attr, AttrKey, AttrValue, ConvDims, WindowDim};
use crate::builder::default_layout;
use crate::literal::{complex_to_element, f64_to_element, i128_to_element, ArrayLiteral, Literal};
use crate::module::{CompId, ConstValue, InstId, Module, NewInst};
use crate::opcode::Opcode;
use crate::shape_inference::{infer_shape, OwnedShape};
use crate::types::{ArrayShape, ComparisonDirection, ComparisonType, ElementType};

/// How deep ops that call computations nest.
pub const MAX_DEPTH: usize = 2;

/// The most ops [`Program::from_bytes`] decodes at each level.
const MAX_OPS: usize = 24;

/// One op of a program: `kind` picks what to build, `a`..`d` pick operands and options, `body`
/// is built into the computation the op calls (if it calls one).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Op {
    /// Which operation (taken modulo the number of kinds).
    pub kind: u8,
    /// First operand choice.
    pub a: u8,
    /// Second operand choice.
    pub b: u8,
    /// Shape, type, option choice.
    pub c: u8,
    /// Further options (attributes, constants, names).
    pub d: u8,
    /// Ops of the called computation (`while`, `conditional`, `call`, `map`).
    pub body: Vec<Op>,
}

/// A recipe for a valid module; see the module docs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Program {
    /// Entry parameters as (dimensions choice, element type choice); none gives one `f32[4]`.
    pub params: Vec<(u8, u8)>,
    /// The ops, in order.
    pub ops: Vec<Op>,
    /// How many of the last values the root tuple returns (one to four).
    pub outputs: u8,
}

/// The number of op kinds (see `Builder::op`).
const KINDS: u8 = 34;

/// Kinds whose op calls a computation built from its body.
fn nests(kind: u8) -> bool {
    matches!(kind % KINDS, 22..=25)
}

/// Dimension lists shapes are drawn from: scalars, unit and zero-sized dimensions, odd sizes.
const DIMS: &[&[i64]] = &[
    &[],
    &[4],
    &[3],
    &[1],
    &[0],
    &[8],
    &[2, 3],
    &[4, 8],
    &[3, 1],
    &[0, 3],
    &[1, 5],
    &[3, 3],
    &[2, 1, 3],
    &[2, 3, 4],
    &[5, 0, 2],
    &[2, 2, 2, 2],
    &[7],
];

/// Element type for a choice byte: mostly the common types, every type reachable.
fn elem_type(t: u8) -> ElementType {
    use ElementType::*;
    const COMMON: [ElementType; 8] = [F32, F32, S32, Pred, F64, F16, BF16, C64];
    if t < 128 {
        COMMON[t as usize % COMMON.len()]
    } else {
        ElementType::ALL[t as usize % ElementType::ALL.len()]
    }
}

/// A deterministic mix of choice bytes, for choices made per dimension.
fn mix(x: u64, i: u64) -> u64 {
    let mut z = x
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(i.wrapping_mul(0xbf58_476d_1ce4_e5b9));
    z ^= z >> 31;
    z = z.wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 29)
}

/// Float values constants are made of: special values and small exact multiples of 1/8.
const FLOATS: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    1e-40,
    65504.0,
    1e30,
    0.5,
    2.0,
];

/// The bytes of one element of type `ty` chosen by `k`.
fn element(ty: ElementType, k: u64) -> Vec<u8> {
    let float = |k: u64| {
        if k.is_multiple_of(4) {
            FLOATS[(k / 4) as usize % FLOATS.len()]
        } else {
            ((k / 4) % 128) as f64 / 8.0 - 8.0
        }
    };
    if ty.is_pred() {
        vec![(k & 1) as u8]
    } else if ty.is_complex() {
        complex_to_element(ty, float(k), float(k >> 8))
    } else if ty.is_float() {
        f64_to_element(ty, float(k))
    } else {
        let b = ty.bits();
        let (lo, hi) = if ty.is_signed_int() {
            (-(1i128 << (b - 1)), (1i128 << (b - 1)) - 1)
        } else {
            (0, (1i128 << b) - 1)
        };
        let v = match k % 8 {
            0 => lo,
            1 => hi,
            2 => -1,
            _ => ((k / 8) % 9) as i128 - 2,
        };
        i128_to_element(ty, v.clamp(lo, hi))
    }
}

/// A literal of shape `ty[dims]` whose elements are chosen from `seed`.
fn literal(ty: ElementType, dims: &[i64], seed: u64) -> Literal {
    let n: i64 = dims.iter().product();
    let mut data = Vec::with_capacity(n.max(0) as usize * ty.byte_size());
    for i in 0..n.max(0) as u64 {
        data.extend(element(ty, mix(seed, i)));
    }
    Literal::Array(ArrayLiteral {
        shape: ArrayShape::new(ty, dims),
        data,
    })
}

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Self {
        arbitrary_op(g, 0)
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        let s = self.clone();
        let (t, u, v, w) = (s.clone(), s.clone(), s.clone(), s.clone());
        Box::new(
            s.body
                .shrink()
                .map(move |body| Op { body, ..t.clone() })
                .chain(s.a.shrink().map(move |a| Op { a, ..u.clone() }))
                .chain(s.b.shrink().map(move |b| Op { b, ..v.clone() }))
                .chain(s.c.shrink().map(move |c| Op { c, ..w.clone() }))
                .chain(s.d.shrink().map(move |d| Op { d, ..s.clone() })),
        )
    }
}

fn arbitrary_op(g: &mut Gen, depth: usize) -> Op {
    let kind = u8::arbitrary(g);
    let body = if nests(kind) && depth < MAX_DEPTH {
        let n = usize::arbitrary(g) % 5;
        (0..n).map(|_| arbitrary_op(g, depth + 1)).collect()
    } else {
        Vec::new()
    };
    Op {
        kind,
        a: u8::arbitrary(g),
        b: u8::arbitrary(g),
        c: u8::arbitrary(g),
        d: u8::arbitrary(g),
        body,
    }
}

impl Arbitrary for Program {
    fn arbitrary(g: &mut Gen) -> Self {
        let np = 1 + usize::arbitrary(g) % 3;
        let params = (0..np)
            .map(|_| (u8::arbitrary(g), u8::arbitrary(g)))
            .collect();
        let n = usize::arbitrary(g) % (g.size().min(MAX_OPS) + 1);
        Program {
            params,
            ops: (0..n).map(|_| arbitrary_op(g, 0)).collect(),
            outputs: u8::arbitrary(g),
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        let (this, that) = (self.clone(), self.clone());
        Box::new(
            self.ops
                .shrink()
                .map(move |ops| Program {
                    ops,
                    ..this.clone()
                })
                .chain(
                    self.params
                        .shrink()
                        .filter(|p| !p.is_empty())
                        .map(move |params| Program {
                            params,
                            ..that.clone()
                        }),
                )
                .take(64),
        )
    }
}

fn ops_from(u: &mut Unstructured<'_>, depth: usize) -> Vec<Op> {
    let n = u.int_in_range(0..=MAX_OPS as u8).unwrap_or(0) as usize;
    let n = if depth > 0 { n % 5 } else { n };
    let mut ops = Vec::with_capacity(n);
    for _ in 0..n {
        if u.is_empty() {
            break;
        }
        let [kind, a, b, c, d] = take5(u);
        let body = if nests(kind) && depth < MAX_DEPTH {
            ops_from(u, depth + 1)
        } else {
            Vec::new()
        };
        ops.push(Op {
            kind,
            a,
            b,
            c,
            d,
            body,
        });
    }
    ops
}

/// The next five choice bytes (zeros once the input runs out).
fn take5(u: &mut Unstructured<'_>) -> [u8; 5] {
    let mut out = [0u8; 5];
    // Filling from too few bytes pads with zeros, which is what we want.
    let _ = u.fill_buffer(&mut out);
    out
}

impl Program {
    /// Decodes a program from raw bytes (a fuzzer's input, or bytes drawn from a seed). Any
    /// bytes decode to some program; short inputs give short programs.
    pub fn from_bytes(data: &[u8]) -> Program {
        let mut u = Unstructured::new(data);
        let np = 1 + u.int_in_range(0..=2u8).unwrap_or(0) as usize;
        let params = (0..np)
            .map(|_| {
                let [x, y, ..] = take5(&mut u);
                (x, y)
            })
            .collect();
        let outputs = u.int_in_range(1..=4u8).unwrap_or(1);
        Program {
            params,
            ops: ops_from(&mut u, 0),
            outputs,
        }
    }

    /// The number of ops, nested ones included (a size for reports).
    pub fn len(&self) -> usize {
        fn count(ops: &[Op]) -> usize {
            ops.iter().map(|o| 1 + count(&o.body)).sum()
        }
        count(&self.ops)
    }

    /// Whether the program has no ops.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Builds the module this program describes. Always valid.
    pub fn build(&self) -> Module {
        let mut m = Module::new("generated");
        let entry = m.add_computation("main");
        m.set_entry(entry);
        let mut b = Builder {
            m,
            reducers: HashMap::new(),
            comparators: HashMap::new(),
            comps: 0,
            names: 0,
        };
        let mut s = Scope {
            comp: entry,
            values: Vec::new(),
        };
        let params: &[(u8, u8)] = if self.params.is_empty() {
            &[(1, 0)]
        } else {
            &self.params
        };
        for (i, &(d, t)) in params.iter().enumerate() {
            let shape = OwnedShape::array(elem_type(t), DIMS[d as usize % DIMS.len()]);
            b.param(&mut s, i, shape);
        }
        for op in &self.ops {
            b.op(&mut s, op, 0);
        }
        let n = (self.outputs.clamp(1, 4) as usize).min(s.values.len());
        let outs = s.values[s.values.len() - n..].to_vec();
        let root = b
            .push(&mut s, Opcode::Tuple, &outs, vec![], None)
            .expect("a tuple of array values always infers");
        b.m.set_root(entry, root);
        b.m.remove_computations(&unreachable(&b.m));
        // Ops that did not fit may have left tombstones; a built module has none.
        b.m.compact();
        b.m
    }
}

/// Whether the reference evaluator runs `op` with a first operand of type `ty`. Shape inference
/// accepts a few combinations that XLA leaves undefined and the evaluator rejects with a clear
/// error (ordering compares, clamp, top-k and most transcendentals of complex numbers,
/// reduce-precision outside f16/bf16/f32/f64, dots of `pred`); programs skip them.
fn evaluable(op: Opcode, ty: ElementType, attrs: &[Attr]) -> bool {
    use Opcode::*;
    match op {
        Compare if ty.is_complex() => attrs.iter().any(|(k, v)| {
            *k == AttrKey::Direction
                && matches!(
                    v,
                    AttrValue::Direction(ComparisonDirection::Eq | ComparisonDirection::Ne)
                )
        }),
        Clamp | TopK | Remainder | Atan2 | Cbrt | Logistic | Tan | Maximum | Minimum => {
            !ty.is_complex()
        }
        ReducePrecision => matches!(
            ty,
            ElementType::F16 | ElementType::BF16 | ElementType::F32 | ElementType::F64
        ),
        Dot | Convolution => !ty.is_pred(),
        _ => true,
    }
}

/// Window dimensions drawn from `seed` (salted by `salt`): size 1..=3, stride 1..=2, padding
/// 0..=1 on each side, some base and window dilation.
fn window_dims(seed: u64, salt: u64, rank: usize) -> Vec<WindowDim> {
    (0..rank)
        .map(|i| {
            let r = mix(seed, salt + i as u64);
            WindowDim {
                size: 1 + (r % 3) as i64,
                stride: 1 + ((r >> 2) % 2) as i64,
                pad_lo: ((r >> 3) % 2) as i64,
                pad_hi: ((r >> 4) % 2) as i64,
                lhs_dilate: 1 + ((r >> 5) % 4 / 3) as i64,
                rhs_dilate: 1 + ((r >> 7) % 4 / 3) as i64,
                reversal: false,
            }
        })
        .collect()
}

/// Computations not called from the entry (left by ops that did not fit).
fn unreachable(m: &Module) -> Vec<CompId> {
    let mut seen = vec![false; m.comp_capacity()];
    let mut stack = vec![m.entry()];
    seen[m.entry().index()] = true;
    let by_comp = m.insts_by_comp();
    while let Some(c) = stack.pop() {
        for &i in &by_comp[c] {
            for k in m.called_comps_iter(i) {
                if !seen[k.index()] {
                    seen[k.index()] = true;
                    stack.push(k);
                }
            }
        }
    }
    m.computations()
        .into_iter()
        .filter(|c| !seen[c.index()])
        .collect()
}

/// The computation being built and the array values it has so far.
struct Scope {
    comp: CompId,
    values: Vec<InstId>,
}

struct Builder {
    m: Module,
    /// Scalar reducers by (opcode, element type).
    reducers: HashMap<(Opcode, ElementType), CompId>,
    /// Sort comparators by (element types of the operands, direction).
    comparators: HashMap<(Vec<ElementType>, ComparisonDirection), CompId>,
    comps: usize,
    names: usize,
}

fn ints(v: &[i64]) -> AttrValue {
    AttrValue::Ints(v.into())
}

impl Builder {
    fn array(&self, id: InstId) -> ArrayShape {
        self.m
            .array_shape(id)
            .cloned()
            .expect("scope values are arrays")
    }

    /// Adds an instruction if its shape infers, and makes array results available.
    fn push(
        &mut self,
        s: &mut Scope,
        opcode: Opcode,
        operands: &[InstId],
        attrs: Vec<Attr>,
        declared: Option<OwnedShape>,
    ) -> Option<InstId> {
        let ty = operands
            .first()
            .and_then(|&o| self.m.array_shape(o))
            .map(|a| a.ty);
        if ty.is_some_and(|ty| !evaluable(opcode, ty, &attrs)) {
            return None;
        }
        let shape = infer_shape(&self.m, opcode, operands, &attrs, declared.as_ref()).ok()?;
        let layout = default_layout(&mut self.m, &shape);
        let shape_id = shape.intern(&mut self.m);
        self.names += 1;
        // Every third instruction is named; the printer names the others.
        let name = self
            .names
            .is_multiple_of(3)
            .then(|| format!("v{}", self.names));
        let id = self.m.push_inst(
            s.comp,
            NewInst {
                opcode,
                shape: shape_id,
                layout,
                operands: operands.to_vec(),
                attrs,
                name,
            },
        );
        if matches!(shape, OwnedShape::Array(_)) {
            s.values.push(id);
        }
        Some(id)
    }

    fn param(&mut self, s: &mut Scope, i: usize, shape: OwnedShape) -> InstId {
        self.push(
            s,
            Opcode::Parameter,
            &[],
            vec![(AttrKey::ParameterNumber, AttrValue::Int(i as i64))],
            Some(shape),
        )
        .expect("parameters always infer")
    }

    fn constant(&mut self, s: &mut Scope, l: Literal) -> InstId {
        let shape = crate::builder::literal_shape(&l);
        let id = self
            .push(s, Opcode::Constant, &[], vec![], Some(shape))
            .expect("constants always infer");
        self.m.set_constant(id, ConstValue::Literal(l));
        id
    }

    fn new_comp(&mut self, what: &str) -> Scope {
        self.comps += 1;
        let comp = self.m.add_computation(&format!("{what}_{}", self.comps));
        Scope {
            comp,
            values: Vec::new(),
        }
    }

    /// Removes a computation built for an instruction that did not infer.
    fn drop_comp(&mut self, c: CompId) {
        self.m.remove_computation(c);
    }

    /// `(a, b) -> op(a, b)` over scalars of `ty`.
    fn reducer(&mut self, op: Opcode, ty: ElementType) -> Option<CompId> {
        if let Some(&c) = self.reducers.get(&(op, ty)) {
            return Some(c);
        }
        let mut s = self.new_comp("reducer");
        let x = self.param(&mut s, 0, OwnedShape::scalar(ty));
        let y = self.param(&mut s, 1, OwnedShape::scalar(ty));
        // `Tuple` stands for "the second argument" (an overwriting scatter).
        let r = if op == Opcode::Tuple {
            Some(y)
        } else {
            self.push(&mut s, op, &[x, y], vec![], None)
        };
        let Some(r) = r else {
            self.drop_comp(s.comp);
            return None;
        };
        self.m.set_root(s.comp, r);
        self.reducers.insert((op, ty), s.comp);
        Some(s.comp)
    }

    /// A reducer for `ty` chosen by `k` (one that applies to the type).
    fn some_reducer(&mut self, ty: ElementType, k: u8) -> Option<(CompId, Opcode)> {
        use Opcode::*;
        let ops: &[Opcode] = if ty.is_pred() {
            &[Or, And]
        } else if ty.is_complex() {
            &[Add, Multiply]
        } else if ty.is_float() {
            &[Add, Maximum, Minimum, Multiply]
        } else {
            &[Add, Maximum, Minimum, Multiply, And, Or, Xor]
        };
        let op = ops[k as usize % ops.len()];
        Some((self.reducer(op, ty)?, op))
    }

    /// The identity of a reducer (or, with `odd`, another value) as a scalar constant.
    fn init(&mut self, s: &mut Scope, ty: ElementType, op: Opcode, odd: u8) -> InstId {
        if odd.is_multiple_of(4) {
            return self.constant(s, literal(ty, &[], odd as u64 * 7 + 1));
        }
        let v = match op {
            Opcode::Multiply | Opcode::And => 1.0,
            Opcode::Maximum => f64::NEG_INFINITY,
            Opcode::Minimum => f64::INFINITY,
            _ => 0.0,
        };
        let l = if ty.is_float() || ty.is_complex() {
            let data = if ty.is_complex() {
                complex_to_element(ty, v, 0.0)
            } else {
                f64_to_element(ty, v)
            };
            Literal::Array(ArrayLiteral {
                shape: ArrayShape::new(ty, &[]),
                data,
            })
        } else {
            let b = ty.bits();
            let (lo, hi) = if ty.is_pred() {
                (0, 1)
            } else if ty.is_signed_int() {
                (-(1i128 << (b - 1)), (1i128 << (b - 1)) - 1)
            } else {
                (0, (1i128 << b) - 1)
            };
            let v = match op {
                Opcode::Maximum => lo,
                Opcode::Minimum => hi,
                Opcode::And => {
                    if ty.is_pred() || !ty.is_signed_int() {
                        hi
                    } else {
                        -1
                    }
                }
                Opcode::Multiply => 1,
                _ => 0,
            };
            Literal::Array(ArrayLiteral {
                shape: ArrayShape::new(ty, &[]),
                data: i128_to_element(ty, v),
            })
        };
        self.constant(s, l)
    }

    /// A comparator over scalars of `tys` comparing the first pair in direction `dir` (total
    /// order for floats, so that NaNs sort deterministically).
    fn comparator(&mut self, tys: &[ElementType], dir: ComparisonDirection) -> Option<CompId> {
        if let Some(&c) = self.comparators.get(&(tys.to_vec(), dir)) {
            return Some(c);
        }
        let mut s = self.new_comp("compare");
        let mut ps = Vec::new();
        for (i, &t) in tys.iter().enumerate() {
            ps.push(self.param(&mut s, 2 * i, OwnedShape::scalar(t)));
            ps.push(self.param(&mut s, 2 * i + 1, OwnedShape::scalar(t)));
        }
        let mut attrs = vec![(AttrKey::Direction, AttrValue::Direction(dir))];
        if tys[0].is_float() {
            attrs.push((
                AttrKey::Type,
                AttrValue::CmpType(ComparisonType::TotalOrder),
            ));
        }
        let Some(r) = self.push(&mut s, Opcode::Compare, &ps[..2], attrs, None) else {
            self.drop_comp(s.comp);
            return None;
        };
        self.m.set_root(s.comp, r);
        self.comparators.insert((tys.to_vec(), dir), s.comp);
        Some(s.comp)
    }

    fn pick(&self, s: &Scope, k: u8) -> Option<InstId> {
        (!s.values.is_empty()).then(|| s.values[k as usize % s.values.len()])
    }

    /// A value for which `ok` holds, chosen by `k`.
    fn pick_where(&self, s: &Scope, k: u8, ok: impl Fn(&ArrayShape) -> bool) -> Option<InstId> {
        let v: Vec<InstId> = s
            .values
            .iter()
            .copied()
            .filter(|&i| ok(&self.array(i)))
            .collect();
        (!v.is_empty()).then(|| v[k as usize % v.len()])
    }

    /// A value of the same shape as `x` (`x` itself when there is no other).
    fn same_shape(&self, s: &Scope, k: u8, x: InstId) -> InstId {
        let want = self.array(x);
        self.pick_where(s, k, |a| a.ty == want.ty && a.dims == want.dims)
            .unwrap_or(x)
    }

    /// A scalar of type `ty`: an existing one chosen by `k`, or a constant.
    fn scalar(&mut self, s: &mut Scope, ty: ElementType, k: u8) -> InstId {
        if k.is_multiple_of(2) {
            if let Some(v) = self.pick_where(s, k / 2, |a| a.ty == ty && a.dims.is_empty()) {
                return v;
            }
        }
        self.constant(s, literal(ty, &[], k as u64))
    }

    /// Tries `ops[start..]` then `ops[..start]` on `operands` until one infers.
    fn first_that_infers(
        &mut self,
        s: &mut Scope,
        ops: &[Opcode],
        start: u8,
        operands: &[InstId],
        attrs: impl Fn(Opcode) -> Vec<Attr>,
    ) -> Option<InstId> {
        (0..ops.len()).find_map(|k| {
            let op = ops[(start as usize + k) % ops.len()];
            self.push(s, op, operands, attrs(op), None)
        })
    }

    /// Builds `op` into scope `s` (see [`Program`]); does nothing when it does not fit.
    fn op(&mut self, s: &mut Scope, op: &Op, depth: usize) {
        use Opcode::*;
        let (a, b, c, d) = (op.a, op.b, op.c, op.d);
        let seed = u64::from_le_bytes([a, b, c, d, op.kind, 0, 0, 0]);
        match op.kind % KINDS {
            0 | 1 => {
                const UNARY: &[Opcode] = &[
                    Abs,
                    Cbrt,
                    Ceil,
                    Clz,
                    Cos,
                    Erf,
                    Exp,
                    Expm1,
                    Floor,
                    Imag,
                    IsFinite,
                    Log,
                    Log1p,
                    Logistic,
                    Negate,
                    Not,
                    Popcnt,
                    Real,
                    RoundNearestAfz,
                    RoundNearestEven,
                    Rsqrt,
                    Sign,
                    Sin,
                    Sqrt,
                    Tan,
                    Tanh,
                    Copy,
                    ReducePrecision,
                ];
                let Some(x) = self.pick(s, a) else { return };
                let rp = vec![
                    (AttrKey::ExponentBits, AttrValue::Int(1 + (d % 8) as i64)),
                    (AttrKey::MantissaBits, AttrValue::Int((d / 8 % 24) as i64)),
                ];
                self.first_that_infers(s, UNARY, c, &[x], |o| {
                    if o == ReducePrecision {
                        rp.clone()
                    } else {
                        vec![]
                    }
                });
            }
            2..=4 => {
                const BINARY: &[Opcode] = &[
                    Add,
                    Subtract,
                    Multiply,
                    MulHi,
                    Divide,
                    Remainder,
                    Maximum,
                    Minimum,
                    Power,
                    Atan2,
                    And,
                    Or,
                    Xor,
                    ShiftLeft,
                    ShiftRightArithmetic,
                    ShiftRightLogical,
                    Complex,
                ];
                let Some(x) = self.pick(s, a) else { return };
                let y = self.same_shape(s, b, x);
                self.first_that_infers(s, BINARY, c, &[x, y], |_| vec![]);
            }
            5 => {
                // Compare, then select between the compared values (or others of their shape).
                let Some(x) = self.pick(s, a) else { return };
                let y = self.same_shape(s, b, x);
                let dirs = [
                    ComparisonDirection::Eq,
                    ComparisonDirection::Ne,
                    ComparisonDirection::Lt,
                    ComparisonDirection::Le,
                    ComparisonDirection::Gt,
                    ComparisonDirection::Ge,
                ];
                let mut attrs = vec![(
                    AttrKey::Direction,
                    AttrValue::Direction(dirs[c as usize % dirs.len()]),
                )];
                if d % 2 == 1 && self.array(x).ty.is_float() {
                    attrs.push((
                        AttrKey::Type,
                        AttrValue::CmpType(ComparisonType::TotalOrder),
                    ));
                }
                let Some(p) = self.push(s, Compare, &[x, y], attrs, None) else {
                    return;
                };
                let (t, f) = if d % 4 < 2 {
                    (x, y)
                } else {
                    let t = self.same_shape(s, d, x);
                    (t, self.same_shape(s, c, x))
                };
                self.push(s, Select, &[p, t, f], vec![], None);
            }
            6 => {
                // Clamp between scalars or arrays of the operand's shape.
                let Some(x) = self.pick(s, a) else { return };
                let ty = self.array(x).ty;
                let (lo, hi) = if c % 2 == 0 {
                    (self.scalar(s, ty, b), self.scalar(s, ty, d))
                } else {
                    (self.same_shape(s, b, x), self.same_shape(s, d, x))
                };
                self.push(s, Clamp, &[lo, x, hi], vec![], None);
            }
            7 => {
                // Convert to any type, or bitcast-convert to a type of the same width.
                let Some(x) = self.pick(s, a) else { return };
                let ty = ElementType::ALL[c as usize % ElementType::ALL.len()];
                let from = self.array(x);
                if d % 4 == 0 {
                    let same: Vec<ElementType> = ElementType::ALL
                        .iter()
                        .copied()
                        .filter(|t| t.bits() == from.ty.bits())
                        .collect();
                    let to = same[c as usize % same.len()];
                    let shape = OwnedShape::array(to, &from.dims);
                    self.push(s, BitcastConvert, &[x], vec![], Some(shape));
                } else {
                    let shape = OwnedShape::array(ty, &from.dims);
                    self.push(s, Convert, &[x], vec![], Some(shape));
                }
            }
            8 => {
                let dims = DIMS[c as usize % DIMS.len()];
                let l = literal(elem_type(d), dims, seed);
                self.constant(s, l);
            }
            9 => {
                let dims = DIMS[c as usize % DIMS.len()];
                if dims.is_empty() {
                    return;
                }
                let shape = OwnedShape::array(elem_type(d), dims);
                let dim = (a as usize % dims.len()) as i64;
                self.push(
                    s,
                    Iota,
                    &[],
                    vec![(AttrKey::IotaDimension, AttrValue::Int(dim))],
                    Some(shape),
                );
            }
            10 => {
                // Broadcast into a shape with one or two new dimensions (sizes 0 to 3).
                let Some(x) = self.pick(s, a) else { return };
                let xa = self.array(x);
                let extra = 1 + (c % 2) as usize;
                let rank = xa.rank() + extra;
                let mut fresh = vec![false; rank];
                let (mut placed, mut i) = (0, 0);
                while placed < extra {
                    let p = (mix(seed, i) % rank as u64) as usize;
                    placed += usize::from(!fresh[p]);
                    fresh[p] = true;
                    i += 1;
                }
                let mut out = Vec::with_capacity(rank);
                let mut mapping = Vec::with_capacity(xa.rank());
                for (i, &f) in fresh.iter().enumerate() {
                    if f {
                        out.push((mix(seed, 100 + i as u64) % 4) as i64);
                    } else {
                        out.push(xa.dims[mapping.len()]);
                        mapping.push(i as i64);
                    }
                }
                let shape = OwnedShape::array(xa.ty, &out);
                self.push(
                    s,
                    Broadcast,
                    &[x],
                    vec![(AttrKey::Dimensions, ints(&mapping))],
                    Some(shape),
                );
            }
            11 => {
                // Reshape: flatten, add a unit dimension, drop unit dimensions, or split one.
                let Some(x) = self.pick(s, a) else { return };
                let xa = self.array(x);
                let n: i64 = xa.dims.iter().product();
                let out: Vec<i64> = match c % 4 {
                    0 => vec![n],
                    1 => {
                        let mut v = xa.dims.to_vec();
                        v.insert(d as usize % (v.len() + 1), 1);
                        v
                    }
                    2 => xa.dims.iter().copied().filter(|&k| k != 1).collect(),
                    _ => {
                        let f = [2, 3, 4][d as usize % 3];
                        if n % f == 0 {
                            vec![f, n / f]
                        } else {
                            vec![1, n]
                        }
                    }
                };
                let shape = OwnedShape::array(xa.ty, &out);
                self.push(s, Reshape, &[x], vec![], Some(shape));
            }
            12 => {
                let Some(x) = self.pick(s, a) else { return };
                let mut perm: Vec<i64> = (0..self.array(x).rank() as i64).collect();
                for i in (1..perm.len()).rev() {
                    perm.swap(i, (mix(seed, i as u64) % (i as u64 + 1)) as usize);
                }
                self.push(
                    s,
                    Transpose,
                    &[x],
                    vec![(AttrKey::Dimensions, ints(&perm))],
                    None,
                );
            }
            13 => {
                let Some(x) = self.pick(s, a) else { return };
                let dims: Vec<i64> = (0..self.array(x).rank() as i64)
                    .filter(|i| (c >> (i % 8)) & 1 == 1)
                    .collect();
                self.push(
                    s,
                    Reverse,
                    &[x],
                    vec![(AttrKey::Dimensions, ints(&dims))],
                    None,
                );
            }
            14 => {
                let Some(x) = self.pick(s, a) else { return };
                let xa = self.array(x);
                let sl: Vec<[i64; 3]> = xa
                    .dims
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| {
                        let r = mix(seed, i as u64);
                        let lo = (r % (n as u64 + 1)) as i64;
                        let hi = lo + ((r >> 8) % ((n - lo) as u64 + 1)) as i64;
                        [lo, hi, 1 + ((r >> 16) % 3) as i64]
                    })
                    .collect();
                self.push(
                    s,
                    Slice,
                    &[x],
                    vec![(AttrKey::Slice, AttrValue::Slice(sl.into()))],
                    None,
                );
            }
            15 => {
                // Pad with low/high in -1..=2 (negative pads cut) and interior 0..=1.
                let Some(x) = self.pick(s, a) else { return };
                let xa = self.array(x);
                let v = self.scalar(s, xa.ty, b);
                let p: Vec<[i64; 3]> = (0..xa.rank())
                    .map(|i| {
                        let r = mix(seed, i as u64);
                        [
                            (r % 4) as i64 - 1,
                            ((r >> 4) % 4) as i64 - 1,
                            ((r >> 8) % 2) as i64,
                        ]
                    })
                    .collect();
                self.push(
                    s,
                    Pad,
                    &[x, v],
                    vec![(AttrKey::Padding, AttrValue::Padding(p.into()))],
                    None,
                );
            }
            16 => {
                // Concatenate two or three values along a dimension where the others agree.
                let Some(x) = self.pick(s, a) else { return };
                let xa = self.array(x);
                if xa.rank() == 0 {
                    return;
                }
                let dim = c as usize % xa.rank();
                let fits = |o: &ArrayShape| {
                    o.ty == xa.ty
                        && o.rank() == xa.rank()
                        && (0..o.rank()).all(|i| i == dim || o.dims[i] == xa.dims[i])
                };
                let y = self.pick_where(s, b, fits).unwrap_or(x);
                let mut xs = vec![x, y];
                if d % 2 == 1 {
                    xs.push(self.pick_where(s, d / 2, fits).unwrap_or(x));
                }
                self.push(
                    s,
                    Concatenate,
                    &xs,
                    vec![(AttrKey::Dimensions, ints(&[dim as i64]))],
                    None,
                );
            }
            17 => {
                // Reduce over a subset of dimensions, or two values at once (variadic).
                let Some(x) = self.pick(s, a) else { return };
                let xa = self.array(x);
                let dims: Vec<i64> = (0..xa.rank() as i64)
                    .filter(|i| (c >> (i % 8)) & 1 == 1)
                    .collect();
                if d % 5 == 4 {
                    self.variadic_reduce(s, x, b, &dims);
                    return;
                }
                let Some((r, rop)) = self.some_reducer(xa.ty, d) else {
                    return;
                };
                let init = self.init(s, xa.ty, rop, b);
                self.push(
                    s,
                    Reduce,
                    &[x, init],
                    vec![
                        (AttrKey::Dimensions, ints(&dims)),
                        (AttrKey::ToApply, AttrValue::Comp(r)),
                    ],
                    None,
                );
            }
            18 => {
                let Some(x) = self.pick(s, a) else { return };
                let xa = self.array(x);
                let Some((r, rop)) = self.some_reducer(xa.ty, d) else {
                    return;
                };
                let init = self.init(s, xa.ty, rop, b);
                let w = self.window(seed, xa.rank());
                self.push(
                    s,
                    ReduceWindow,
                    &[x, init],
                    vec![(AttrKey::Window, w), (AttrKey::ToApply, AttrValue::Comp(r))],
                    None,
                );
            }
            19 => {
                // Dot: contract a dimension of `x` with an equal-sized one of another value of
                // the same type, or a batched product of two values of one shape.
                let Some(x) = self.pick(s, a) else { return };
                let xa = self.array(x);
                if xa.rank() == 0 || xa.rank() > 3 {
                    return;
                }
                if d % 3 == 0 && xa.rank() >= 2 {
                    let y = self.same_shape(s, b, x);
                    let k = [1 + (c as usize % (xa.rank() - 1)) as i64];
                    let attrs = vec![
                        (AttrKey::LhsBatchDims, ints(&[0])),
                        (AttrKey::RhsBatchDims, ints(&[0])),
                        (AttrKey::LhsContractingDims, ints(&k)),
                        (AttrKey::RhsContractingDims, ints(&k)),
                    ];
                    self.push(s, Dot, &[x, y], attrs, None);
                    return;
                }
                let i = c as usize % xa.rank();
                let n = xa.dims[i];
                let Some(y) = self.pick_where(s, b, |o| {
                    o.ty == xa.ty && o.rank() <= 3 && o.dims.contains(&n)
                }) else {
                    return;
                };
                let j = self.array(y).dims.iter().position(|&k| k == n).unwrap_or(0);
                let attrs = vec![
                    (AttrKey::LhsContractingDims, ints(&[i as i64])),
                    (AttrKey::RhsContractingDims, ints(&[j as i64])),
                ];
                self.push(s, Dot, &[x, y], attrs, None);
            }
            20 => {
                // Dynamic slice or dynamic update slice with indices that may be out of range.
                let Some(x) = self.pick(s, a) else { return };
                let xa = self.array(x);
                let idx: Vec<InstId> = (0..xa.rank())
                    .map(|i| self.scalar(s, ElementType::S32, (mix(seed, i as u64) % 256) as u8))
                    .collect();
                if d % 2 == 0 {
                    let sizes: Vec<i64> = xa
                        .dims
                        .iter()
                        .enumerate()
                        .map(|(i, &n)| (mix(seed, 50 + i as u64) % (n as u64 + 1)) as i64)
                        .collect();
                    let mut ops = vec![x];
                    ops.extend(idx);
                    self.push(
                        s,
                        DynamicSlice,
                        &ops,
                        vec![(AttrKey::DynamicSliceSizes, ints(&sizes))],
                        None,
                    );
                } else {
                    let fits = |o: &ArrayShape| {
                        o.ty == xa.ty
                            && o.rank() == xa.rank()
                            && o.dims.iter().zip(xa.dims.iter()).all(|(p, q)| p <= q)
                    };
                    let u = self.pick_where(s, b, fits).unwrap_or(x);
                    let mut ops = vec![x, u];
                    ops.extend(idx);
                    self.push(s, DynamicUpdateSlice, &ops, vec![], None);
                }
            }
            21 => self.gather_scatter(s, op, seed),
            22 => self.while_loop(s, op, depth),
            23 => self.conditional(s, op, depth),
            24 => self.call(s, op, depth),
            25 => self.map(s, op, depth),
            26 => {
                // Sort one value, or a value with an iota of its shape (a stable argsort).
                let Some(x) = self.pick(s, a) else { return };
                let xa = self.array(x);
                if xa.rank() == 0 {
                    return;
                }
                let dim = c as usize % xa.rank();
                let dir = if d % 2 == 0 {
                    ComparisonDirection::Lt
                } else {
                    ComparisonDirection::Gt
                };
                let mut attrs = vec![(AttrKey::Dimensions, ints(&[dim as i64]))];
                if d % 4 >= 2 {
                    attrs.push((AttrKey::IsStable, AttrValue::Bool(true)));
                }
                if b % 2 == 0 {
                    let Some(cmp) = self.comparator(&[xa.ty], dir) else {
                        return;
                    };
                    attrs.push((AttrKey::ToApply, AttrValue::Comp(cmp)));
                    self.push(s, Sort, &[x], attrs, None);
                } else {
                    let shape = OwnedShape::array(ElementType::S32, &xa.dims);
                    let Some(i) = self.push(
                        s,
                        Iota,
                        &[],
                        vec![(AttrKey::IotaDimension, AttrValue::Int(dim as i64))],
                        Some(shape),
                    ) else {
                        return;
                    };
                    let Some(cmp) = self.comparator(&[xa.ty, ElementType::S32], dir) else {
                        return;
                    };
                    attrs.push((AttrKey::ToApply, AttrValue::Comp(cmp)));
                    if let Some(t) = self.push(s, Sort, &[x, i], attrs, None) {
                        self.gte(s, t, (c / 2 % 2) as i64);
                    }
                }
            }
            27 => {
                // A tuple through an optimization barrier, and one element back out.
                let Some(x) = self.pick(s, a) else { return };
                let y = self.pick(s, b).unwrap_or(x);
                let Some(t) = self.push(s, Tuple, &[x, y], vec![], None) else {
                    return;
                };
                let t = if d % 2 == 0 {
                    self.push(s, OptBarrier, &[t], vec![], None).unwrap_or(t)
                } else {
                    t
                };
                self.gte(s, t, (c % 2) as i64);
            }
            28 => {
                let Some(x) = self.pick(s, a) else { return };
                let xa = self.array(x);
                if xa.rank() == 0 {
                    return;
                }
                let last = *xa.dims.last().unwrap_or(&0);
                let k = (c as i64) % (last + 1);
                if let Some(t) = self.push(
                    s,
                    TopK,
                    &[x],
                    vec![
                        (AttrKey::K, AttrValue::Int(k)),
                        (AttrKey::Largest, AttrValue::Bool(d % 2 == 0)),
                    ],
                    None,
                ) {
                    self.gte(s, t, (b % 2) as i64);
                }
            }
            29 => {
                // FFT family over the last dimension.
                let Some(x) = self.pick(s, a) else { return };
                let xa = self.array(x);
                let Some(&n) = xa.dims.last() else { return };
                let (kind, len) = match c % 4 {
                    0 => ("FFT", n),
                    1 => ("IFFT", n),
                    2 => ("RFFT", n),
                    _ => ("IRFFT", 2 * (n - 1).max(0)),
                };
                self.push(
                    s,
                    Fft,
                    &[x],
                    vec![
                        (AttrKey::FftType, AttrValue::Ident(kind.into())),
                        (AttrKey::FftLength, ints(&[len])),
                    ],
                    None,
                );
            }
            30 => {
                // Cholesky of a square matrix, or a triangular solve with one.
                let Some(x) = self.pick_where(s, a, |o| {
                    o.ty.is_floating()
                        && o.rank() >= 2
                        && o.dims[o.rank() - 1] == o.dims[o.rank() - 2]
                }) else {
                    return;
                };
                if c % 2 == 0 {
                    self.push(
                        s,
                        Cholesky,
                        &[x],
                        vec![(AttrKey::Lower, AttrValue::Bool(d % 2 == 0))],
                        None,
                    );
                } else {
                    // The right-hand sides: same type and batch dimensions, and the matrix's
                    // size in the solved dimension (rows on the left side, columns on the right).
                    let xa = self.array(x);
                    let r = xa.rank();
                    let left = d % 2 == 0;
                    let n = xa.dims[r - 1];
                    let Some(y) = self.pick_where(s, b, |o| {
                        o.ty == xa.ty
                            && o.rank() == r
                            && o.dims[..r - 2] == xa.dims[..r - 2]
                            && o.dims[if left { r - 2 } else { r - 1 }] == n
                    }) else {
                        return;
                    };
                    let attrs = vec![
                        (AttrKey::LeftSide, AttrValue::Bool(left)),
                        (AttrKey::Lower, AttrValue::Bool(d / 2 % 2 == 0)),
                        (AttrKey::UnitDiagonal, AttrValue::Bool(d / 4 % 2 == 0)),
                        (
                            AttrKey::TransposeA,
                            AttrValue::Ident(
                                if d / 8 % 2 == 0 {
                                    "NO_TRANSPOSE"
                                } else {
                                    "TRANSPOSE"
                                }
                                .into(),
                            ),
                        ),
                    ];
                    self.push(s, TriangularSolve, &[x, y], attrs, None);
                }
            }
            31 => self.convolution(s, op, seed),
            32 => {
                // Select-and-scatter of a reduce-window's shape back onto its operand.
                let Some(x) = self.pick_where(s, a, |o| o.ty.is_float() && o.rank() >= 1) else {
                    return;
                };
                let ty = self.array(x).ty;
                // Select-and-scatter windows have no dilation.
                let w = match self.window(seed, self.array(x).rank()) {
                    AttrValue::Window(w) => AttrValue::Window(
                        w.iter()
                            .map(|d| WindowDim {
                                lhs_dilate: 1,
                                rhs_dilate: 1,
                                ..d.clone()
                            })
                            .collect(),
                    ),
                    w => w,
                };
                let Some((max, _)) = self.some_reducer(ty, 1) else {
                    return;
                };
                let init = self.init(s, ty, Maximum, 1);
                let Some(src) = self.push(
                    s,
                    ReduceWindow,
                    &[x, init],
                    vec![
                        (AttrKey::Window, w.clone()),
                        (AttrKey::ToApply, AttrValue::Comp(max)),
                    ],
                    None,
                ) else {
                    return;
                };
                let dir = if d % 2 == 0 {
                    ComparisonDirection::Ge
                } else {
                    ComparisonDirection::Le
                };
                let Some(select) = self.comparator(&[ty], dir) else {
                    return;
                };
                let Some((add, _)) = self.some_reducer(ty, 0) else {
                    return;
                };
                let zero = self.init(s, ty, Add, 1);
                self.push(
                    s,
                    SelectAndScatter,
                    &[x, src, zero],
                    vec![
                        (AttrKey::Window, w),
                        (AttrKey::Select, AttrValue::Comp(select)),
                        (AttrKey::Scatter, AttrValue::Comp(add)),
                    ],
                    None,
                );
            }
            _ => {
                let Some(x) = self.pick(s, a) else { return };
                let rank = self.array(x).rank();
                if rank > 0 {
                    let dim = AttrValue::Ints([(c as usize % rank) as i64].into());
                    self.push(
                        s,
                        GetDimensionSize,
                        &[x],
                        vec![(AttrKey::Dimensions, dim)],
                        None,
                    );
                }
            }
        }
    }

    fn gte(&mut self, s: &mut Scope, t: InstId, k: i64) -> Option<InstId> {
        self.push(
            s,
            Opcode::GetTupleElement,
            &[t],
            vec![(AttrKey::Index, AttrValue::Int(k))],
            None,
        )
    }

    /// A window per dimension: size 1..=3, stride 1..=2, padding 0..=1, some dilation.
    fn window(&self, seed: u64, rank: usize) -> AttrValue {
        AttrValue::Window(window_dims(seed, 200, rank).into())
    }

    /// An argmax-style reduce of `x` with an iota of its shape: two results, two inits.
    fn variadic_reduce(&mut self, s: &mut Scope, x: InstId, k: u8, dims: &[i64]) {
        use Opcode::*;
        let xa = self.array(x);
        if xa.rank() == 0 || !(xa.ty.is_float() || xa.ty.is_int()) {
            return;
        }
        let shape = OwnedShape::array(ElementType::S32, &xa.dims);
        let Some(i) = self.push(
            s,
            Iota,
            &[],
            vec![(AttrKey::IotaDimension, AttrValue::Int(0))],
            Some(shape),
        ) else {
            return;
        };
        // (v0, i0, v1, i1) -> v0 >= v1 ? (v0, i0) : (v1, i1)
        let mut r = self.new_comp("argmax");
        let v0 = self.param(&mut r, 0, OwnedShape::scalar(xa.ty));
        let i0 = self.param(&mut r, 1, OwnedShape::scalar(ElementType::S32));
        let v1 = self.param(&mut r, 2, OwnedShape::scalar(xa.ty));
        let i1 = self.param(&mut r, 3, OwnedShape::scalar(ElementType::S32));
        let mut attrs = vec![(
            AttrKey::Direction,
            AttrValue::Direction(ComparisonDirection::Ge),
        )];
        if xa.ty.is_float() {
            attrs.push((
                AttrKey::Type,
                AttrValue::CmpType(ComparisonType::TotalOrder),
            ));
        }
        let built = (|| {
            let p = self.push(&mut r, Compare, &[v0, v1], attrs, None)?;
            let v = self.push(&mut r, Select, &[p, v0, v1], vec![], None)?;
            let j = self.push(&mut r, Select, &[p, i0, i1], vec![], None)?;
            self.push(&mut r, Tuple, &[v, j], vec![], None)
        })();
        let Some(root) = built else {
            self.drop_comp(r.comp);
            return;
        };
        self.m.set_root(r.comp, root);
        let init_v = self.init(s, xa.ty, Maximum, k);
        let init_i = self.constant(s, literal(ElementType::S32, &[], 3));
        match self.push(
            s,
            Reduce,
            &[x, i, init_v, init_i],
            vec![
                (AttrKey::Dimensions, ints(dims)),
                (AttrKey::ToApply, AttrValue::Comp(r.comp)),
            ],
            None,
        ) {
            Some(t) => {
                self.gte(s, t, (k % 2) as i64);
            }
            None => self.drop_comp(r.comp),
        }
    }

    /// Gather rows of `x` along one dimension with constant (possibly out-of-range) indices,
    /// and, with `d` odd, scatter the gathered rows (changed elementwise) back, overwriting,
    /// adding, or (integers and pred) combining by `maximum`, `minimum`, `and`, `or` or `xor`.
    fn gather_scatter(&mut self, s: &mut Scope, op: &Op, seed: u64) {
        use Opcode::*;
        let Some(x) = self.pick(s, op.a) else { return };
        let xa = self.array(x);
        if xa.rank() == 0 {
            return;
        }
        let j = op.c as usize % xa.rank();
        let k = (op.b % 4) as i64;
        let idx_vals: Vec<u8> = (0..k)
            .flat_map(|i| i128_to_element(ElementType::S32, (mix(seed, i as u64) % 9) as i128 - 2))
            .collect();
        let idx = self.constant(
            s,
            Literal::Array(ArrayLiteral {
                shape: ArrayShape::new(ElementType::S32, &[k, 1]),
                data: idx_vals,
            }),
        );
        let rest: Vec<i64> = (1..xa.rank() as i64).collect();
        let mut sizes = xa.dims.to_vec();
        sizes[j] = 1;
        let Some(g) = self.push(
            s,
            Gather,
            &[x, idx],
            vec![
                (AttrKey::OffsetDims, ints(&rest)),
                (AttrKey::CollapsedSliceDims, ints(&[j as i64])),
                (AttrKey::StartIndexMap, ints(&[j as i64])),
                (AttrKey::IndexVectorDim, AttrValue::Int(1)),
                (AttrKey::SliceSizes, ints(&sizes)),
            ],
            None,
        ) else {
            return;
        };
        if op.d.is_multiple_of(2) {
            return;
        }
        let upd = self
            .first_that_infers(s, &[Negate, Not, Copy], 0, &[g], |_| vec![])
            .unwrap_or(g);
        // Overwrite, add, or for integers and pred another combiner whose result does not
        // depend on the order of the updates (the nvptx backend's atomic scatter path).
        let combine = match op.d % 4 {
            1 => Tuple,
            _ if xa.ty.is_int() || xa.ty.is_pred() => {
                [Add, Maximum, Minimum, And, Or, Xor][(op.d / 4) as usize % 6]
            }
            _ => Add,
        };
        let Some(r) = self.reducer(combine, xa.ty) else {
            return;
        };
        self.push(
            s,
            Scatter,
            &[x, idx, upd],
            vec![
                (AttrKey::UpdateWindowDims, ints(&rest)),
                (AttrKey::InsertedWindowDims, ints(&[j as i64])),
                (AttrKey::ScatterDimsToOperandDims, ints(&[j as i64])),
                (AttrKey::IndexVectorDim, AttrValue::Int(1)),
                (AttrKey::ToApply, AttrValue::Comp(r)),
            ],
            None,
        );
    }

    /// Builds `ops` into `s` and returns the last value of shape `want` (if any).
    fn body(
        &mut self,
        s: &mut Scope,
        ops: &[Op],
        depth: usize,
        want: Option<&ArrayShape>,
    ) -> Option<InstId> {
        for o in ops {
            self.op(s, o, depth + 1);
        }
        s.values.iter().rev().copied().find(|&v| match want {
            Some(w) => {
                let a = self.array(v);
                a.ty == w.ty && a.dims == w.dims
            }
            None => true,
        })
    }

    /// `while` over `(s32[] counter, x)`: the body applies its ops to `x` and counts; the
    /// condition stops below a constant of at most 3.
    fn while_loop(&mut self, s: &mut Scope, op: &Op, depth: usize) {
        use Opcode::*;
        let Some(x) = self.pick(s, op.a) else { return };
        let xa = self.array(x);
        let s32 = ElementType::S32;
        let state = OwnedShape::tuple(vec![OwnedShape::scalar(s32), OwnedShape::Array(xa.clone())]);
        let mut cond = self.new_comp("cond");
        let mut body = self.new_comp("body");
        let built = (|| {
            let p = self.param(&mut cond, 0, state.clone());
            let i = self.gte(&mut cond, p, 0)?;
            let n = self.constant(&mut cond, Literal::scalar_f64(s32, (op.c % 4) as f64));
            let lt = self.push(
                &mut cond,
                Compare,
                &[i, n],
                vec![(
                    AttrKey::Direction,
                    AttrValue::Direction(ComparisonDirection::Lt),
                )],
                None,
            )?;
            self.m.set_root(cond.comp, lt);
            let p = self.param(&mut body, 0, state.clone());
            let i = self.gte(&mut body, p, 0)?;
            let xin = self.gte(&mut body, p, 1)?;
            let one = self.constant(&mut body, Literal::scalar_f64(s32, 1.0));
            let next = self.push(&mut body, Add, &[i, one], vec![], None)?;
            let out = self
                .body(&mut body, &op.body, depth, Some(&xa))
                .unwrap_or(xin);
            let root = self.push(&mut body, Tuple, &[next, out], vec![], None)?;
            self.m.set_root(body.comp, root);
            let zero = self.constant(s, Literal::scalar_f64(s32, 0.0));
            let init = self.push(s, Tuple, &[zero, x], vec![], None)?;
            let w = self.push(
                s,
                While,
                &[init],
                vec![
                    (AttrKey::Condition, AttrValue::Comp(cond.comp)),
                    (AttrKey::Body, AttrValue::Comp(body.comp)),
                ],
                None,
            )?;
            self.gte(s, w, 1)
        })();
        if built.is_none() {
            self.drop_comp(cond.comp);
            self.drop_comp(body.comp);
        }
    }

    /// `conditional` on a `pred[]` (two branches) or an `s32[]` (one to three, out-of-range
    /// indices running the last); every branch takes `x` and returns a value of its shape.
    fn conditional(&mut self, s: &mut Scope, op: &Op, depth: usize) {
        let Some(x) = self.pick(s, op.a) else { return };
        let xa = self.array(x);
        let (index, n) = if op.c.is_multiple_of(2) {
            (self.scalar(s, ElementType::Pred, op.b), 2)
        } else {
            (
                self.scalar(s, ElementType::S32, op.b),
                1 + (op.c / 2 % 3) as usize,
            )
        };
        let mut branches = Vec::with_capacity(n);
        for k in 0..n {
            let mut br = self.new_comp("branch");
            let p = self.param(&mut br, 0, OwnedShape::Array(xa.clone()));
            let ops: Vec<Op> = op.body.iter().skip(k).step_by(n).cloned().collect();
            let out = self.body(&mut br, &ops, depth, Some(&xa)).unwrap_or(p);
            self.m.set_root(br.comp, out);
            branches.push(br.comp);
        }
        let mut operands = vec![index];
        operands.extend(std::iter::repeat_n(x, n));
        let attrs = vec![(
            AttrKey::BranchComputations,
            AttrValue::Comps(branches.clone().into()),
        )];
        if self
            .push(s, Opcode::Conditional, &operands, attrs, None)
            .is_none()
        {
            for c in branches {
                self.drop_comp(c);
            }
        }
    }

    /// `call` of a computation of one or two parameters, returning its last value.
    fn call(&mut self, s: &mut Scope, op: &Op, depth: usize) {
        let Some(x) = self.pick(s, op.a) else { return };
        let mut args = vec![x];
        if op.c % 2 == 1 {
            args.push(self.pick(s, op.b).unwrap_or(x));
        }
        let mut callee = self.new_comp("callee");
        for (i, &v) in args.iter().enumerate() {
            let shape = OwnedShape::Array(self.array(v));
            self.param(&mut callee, i, shape);
        }
        let out = self.body(&mut callee, &op.body, depth, None);
        let Some(out) = out else { return };
        self.m.set_root(callee.comp, out);
        let attrs = vec![(AttrKey::ToApply, AttrValue::Comp(callee.comp))];
        if self.push(s, Opcode::Call, &args, attrs, None).is_none() {
            self.drop_comp(callee.comp);
        }
    }

    /// `map` of a scalar computation over one or two values of one shape.
    fn map(&mut self, s: &mut Scope, op: &Op, depth: usize) {
        let Some(x) = self.pick(s, op.a) else { return };
        let xa = self.array(x);
        let mut args = vec![x];
        if op.c % 2 == 1 {
            args.push(self.same_shape(s, op.b, x));
        }
        let mut f = self.new_comp("mapped");
        for i in 0..args.len() {
            self.param(&mut f, i, OwnedShape::scalar(xa.ty));
        }
        for o in &op.body {
            self.op(&mut f, o, depth + 1);
        }
        let out = f
            .values
            .iter()
            .rev()
            .copied()
            .find(|&v| self.array(v).dims.is_empty());
        let Some(out) = out else { return };
        self.m.set_root(f.comp, out);
        let dims: Vec<i64> = (0..xa.rank() as i64).collect();
        let attrs = vec![
            (AttrKey::Dimensions, ints(&dims)),
            (AttrKey::ToApply, AttrValue::Comp(f.comp)),
        ];
        if self.push(s, Opcode::Map, &args, attrs, None).is_none() {
            self.drop_comp(f.comp);
        }
    }

    /// A convolution of a rank-3 or rank-4 value (batch, feature, spatial...) with a constant
    /// kernel: window size 1..=3 per spatial dimension, strides, padding, dilations and
    /// feature groups.
    fn convolution(&mut self, s: &mut Scope, op: &Op, seed: u64) {
        let Some(x) = self.pick_where(s, op.a, |o| {
            o.ty.is_floating() && (o.rank() == 3 || o.rank() == 4)
        }) else {
            return;
        };
        let xa = self.array(x);
        let ns = xa.rank() - 2;
        let spatial: Vec<i64> = (2..xa.rank() as i64).collect();
        let features = xa.dims[1];
        let groups = if op.d.is_multiple_of(3) && features > 1 && features % 2 == 0 {
            2
        } else {
            1
        };
        let out_f = groups * (1 + (op.c % 2) as i64);
        let mut kdims = vec![out_f, features / groups];
        let w = window_dims(seed, 300, ns);
        kdims.extend(w.iter().map(|d| d.size));
        let k = self.constant(s, literal(xa.ty, &kdims, seed));
        let dn = ConvDims {
            input_batch: 0,
            input_feature: 1,
            input_spatial: spatial.clone().into(),
            kernel_output_feature: 0,
            kernel_input_feature: 1,
            kernel_spatial: spatial.clone().into(),
            output_batch: 0,
            output_feature: 1,
            output_spatial: spatial.into(),
        };
        self.push(
            s,
            Opcode::Convolution,
            &[x, k],
            vec![
                (AttrKey::Window, AttrValue::Window(w.into())),
                (AttrKey::DimLabels, AttrValue::DimLabels(Box::new(dn))),
                (AttrKey::FeatureGroupCount, AttrValue::Int(groups)),
            ],
            None,
        );
    }
}
