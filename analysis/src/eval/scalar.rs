//! Scalar programs: computations applied per element (reducers, comparators, scatter and
//! select functions, `map` bodies) compiled into a flat list of register ops.
//!
//! A computation compiles when every value in it is a scalar (tuples only to pass scalars
//! around, `call`s inlined). Each register holds one element's bytes; each op runs the same
//! elementwise kernels as whole arrays do, on one element, so per-element semantics cannot
//! drift between arrays and scalars. Computations that do not compile run through the general
//! evaluator instead (slower, same results). [`Fast`] recognizes the shapes common enough to
//! deserve typed loops of their own (`add(p0, p1)`, `p1`), and [`KeySplit`] the comparators
//! that compare one key per element (`compare(f(p0), f(p1))`).

use super::elementwise;
use super::plan_order;
use axle_ir::{
    AttrKey, AttrValue, CompId, ComparisonDirection, ComparisonType, ElementType, InstId, Module,
    Opcode, Shape,
};
use std::collections::HashMap;

/// One register: the bytes of one element (complex128 is the widest at 16 bytes).
pub(crate) type Reg = [u8; 16];

/// A recognized simple form of a scalar computation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Fast {
    /// Nothing simple.
    None,
    /// `root = op(p0, p1)` for a commutative or order-preserving binary op.
    Binary(Opcode),
    /// `root = p(k)`.
    Param(usize),
}

#[derive(Clone, Debug, PartialEq)]
enum SInst {
    Unary {
        op: Opcode,
        in_ty: ElementType,
        out_ty: ElementType,
        a: u32,
        dst: u32,
    },
    Convert {
        from: ElementType,
        to: ElementType,
        a: u32,
        dst: u32,
    },
    Move {
        a: u32,
        dst: u32,
    },
    ReducePrecision {
        ty: ElementType,
        eb: u32,
        mb: u32,
        a: u32,
        dst: u32,
    },
    Binary {
        op: Opcode,
        ty: ElementType,
        a: u32,
        b: u32,
        dst: u32,
    },
    Compare {
        dir: ComparisonDirection,
        cty: ComparisonType,
        ty: ElementType,
        a: u32,
        b: u32,
        dst: u32,
    },
    Select {
        p: u32,
        a: u32,
        b: u32,
        dst: u32,
    },
    Clamp {
        ty: ElementType,
        lo: u32,
        x: u32,
        hi: u32,
        dst: u32,
    },
}

impl SInst {
    /// The registers read, and the one written.
    fn regs(&self) -> (Vec<u32>, u32) {
        match *self {
            SInst::Unary { a, dst, .. }
            | SInst::Convert { a, dst, .. }
            | SInst::Move { a, dst }
            | SInst::ReducePrecision { a, dst, .. } => (vec![a], dst),
            SInst::Binary { a, b, dst, .. } | SInst::Compare { a, b, dst, .. } => (vec![a, b], dst),
            SInst::Select { p, a, b, dst } => (vec![p, a, b], dst),
            SInst::Clamp { lo, x, hi, dst, .. } => (vec![lo, x, hi], dst),
        }
    }

    /// The instruction with every register renamed to 0, to compare what it computes.
    fn op_only(&self) -> SInst {
        let mut c = self.clone();
        match &mut c {
            SInst::Unary { a, dst, .. }
            | SInst::Convert { a, dst, .. }
            | SInst::Move { a, dst }
            | SInst::ReducePrecision { a, dst, .. } => {
                *a = 0;
                *dst = 0;
            }
            SInst::Binary { a, b, dst, .. } | SInst::Compare { a, b, dst, .. } => {
                *a = 0;
                *b = 0;
                *dst = 0;
            }
            SInst::Select { p, a, b, dst } => {
                *p = 0;
                *a = 0;
                *b = 0;
                *dst = 0;
            }
            SInst::Clamp { lo, x, hi, dst, .. } => {
                *lo = 0;
                *x = 0;
                *hi = 0;
                *dst = 0;
            }
        }
        c
    }
}

/// A comparator of the form `compare(f(lhs...), f(rhs...))`: both sides apply the same
/// computation, one to the left-hand parameters (even numbers), the other to the right-hand
/// ones (odd numbers). Sorting can then compute one key per element and compare keys.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeySplit {
    /// The register holding the left-hand key once the program ran.
    pub lhs: u32,
    /// The comparison direction.
    pub dir: ComparisonDirection,
    /// The comparison type.
    pub cty: ComparisonType,
    /// The key's element type.
    pub ty: ElementType,
    /// `Some(k)` when the key is operand `k` itself (no program run needed).
    pub operand: Option<usize>,
}

/// A compiled scalar computation.
#[derive(Debug)]
pub(crate) struct ScalarProg {
    insts: Vec<SInst>,
    widths: Vec<usize>,
    init: Vec<Reg>,
    /// Register of each parameter, by parameter number.
    pub params: Vec<u32>,
    /// Element type of each parameter.
    pub param_tys: Vec<ElementType>,
    /// Registers of the root's leaves, depth-first.
    pub outputs: Vec<u32>,
    /// The recognized simple form.
    pub fast: Fast,
}

#[derive(Clone, Debug)]
enum Loc {
    Reg(u32),
    Tuple(Vec<Loc>),
}

struct Builder<'m> {
    m: &'m Module,
    insts: Vec<SInst>,
    widths: Vec<usize>,
    init: Vec<Reg>,
    tys: Vec<ElementType>,
    depth: usize,
}

fn scalar_ty(s: &Shape) -> Option<ElementType> {
    match s {
        Shape::Array(a) if a.dims.iter().all(|&d| d == 1) => Some(a.ty),
        _ => None,
    }
}

impl<'m> Builder<'m> {
    fn reg(&mut self, ty: ElementType) -> u32 {
        self.widths.push(ty.byte_size());
        self.init.push([0; 16]);
        self.tys.push(ty);
        (self.widths.len() - 1) as u32
    }

    fn leaf(l: &Loc) -> Option<u32> {
        match l {
            Loc::Reg(r) => Some(*r),
            Loc::Tuple(_) => None,
        }
    }

    /// Compiles `comp` with its parameters bound to `params`; returns the root's location.
    fn compile(&mut self, comp: CompId, params: &[Loc]) -> Option<Loc> {
        self.depth += 1;
        if self.depth > 16 {
            return None;
        }
        let m = self.m;
        let order = plan_order(m, comp).ok()?;
        let mut locs: HashMap<InstId, Loc> = HashMap::with_capacity(order.len());
        for &id in &order {
            let op = m.opcode(id);
            let ops = m.operands(id);
            let arg = |k: usize| -> Option<u32> { Builder::leaf(locs.get(&ops[k])?) };
            let shape = m.shape(id);
            let loc = match op {
                Opcode::Parameter => params.get(m.parameter_number(id)? as usize)?.clone(),
                Opcode::Tuple => Loc::Tuple(
                    ops.iter()
                        .map(|o| locs.get(o).cloned())
                        .collect::<Option<Vec<_>>>()?,
                ),
                Opcode::GetTupleElement => match locs.get(&ops[0])? {
                    Loc::Tuple(v) => v.get(m.int_attr(id, &AttrKey::Index)? as usize)?.clone(),
                    Loc::Reg(_) => return None,
                },
                Opcode::Call => {
                    let callee = m.comp_attr(id, &AttrKey::ToApply)?;
                    let args = ops
                        .iter()
                        .map(|o| locs.get(o).cloned())
                        .collect::<Option<Vec<_>>>()?;
                    self.compile(callee, &args)?
                }
                _ => {
                    let ty = scalar_ty(shape)?;
                    match op {
                        Opcode::Constant => {
                            let lit = m.literal(id)?.as_array()?;
                            let r = self.reg(ty);
                            self.init[r as usize][..lit.data.len()].copy_from_slice(&lit.data);
                            Loc::Reg(r)
                        }
                        Opcode::Reshape
                        | Opcode::Broadcast
                        | Opcode::Transpose
                        | Opcode::Copy
                        | Opcode::OptBarrier
                        | Opcode::Domain => {
                            let a = arg(0)?;
                            if self.tys[a as usize] != ty {
                                return None;
                            }
                            Loc::Reg(a)
                        }
                        Opcode::Bitcast | Opcode::BitcastConvert => {
                            let a = arg(0)?;
                            if self.tys[a as usize].bits() != ty.bits() {
                                return None;
                            }
                            let dst = self.reg(ty);
                            self.insts.push(SInst::Move { a, dst });
                            Loc::Reg(dst)
                        }
                        Opcode::Convert => {
                            let a = arg(0)?;
                            let dst = self.reg(ty);
                            let from = self.tys[a as usize];
                            self.insts.push(SInst::Convert {
                                from,
                                to: ty,
                                a,
                                dst,
                            });
                            Loc::Reg(dst)
                        }
                        Opcode::ReducePrecision => {
                            let a = arg(0)?;
                            let dst = self.reg(ty);
                            self.insts.push(SInst::ReducePrecision {
                                ty,
                                eb: m.int_attr(id, &AttrKey::ExponentBits)? as u32,
                                mb: m.int_attr(id, &AttrKey::MantissaBits)? as u32,
                                a,
                                dst,
                            });
                            Loc::Reg(dst)
                        }
                        Opcode::Compare => {
                            let (a, b) = (arg(0)?, arg(1)?);
                            let in_ty = self.tys[a as usize];
                            let dir = match m.attr(id, &AttrKey::Direction)? {
                                AttrValue::Direction(d) => *d,
                                _ => return None,
                            };
                            let cty = m.comparison_type(id, in_ty);
                            let dst = self.reg(ty);
                            self.insts.push(SInst::Compare {
                                dir,
                                cty,
                                ty: in_ty,
                                a,
                                b,
                                dst,
                            });
                            Loc::Reg(dst)
                        }
                        Opcode::Select => {
                            let (p, a, b) = (arg(0)?, arg(1)?, arg(2)?);
                            let dst = self.reg(ty);
                            self.insts.push(SInst::Select { p, a, b, dst });
                            Loc::Reg(dst)
                        }
                        Opcode::Clamp => {
                            let (lo, x, hi) = (arg(0)?, arg(1)?, arg(2)?);
                            let dst = self.reg(ty);
                            self.insts.push(SInst::Clamp { ty, lo, x, hi, dst });
                            Loc::Reg(dst)
                        }
                        _ if op.is_elementwise_unary() && ops.len() == 1 => {
                            let a = arg(0)?;
                            let dst = self.reg(ty);
                            let in_ty = self.tys[a as usize];
                            self.insts.push(SInst::Unary {
                                op,
                                in_ty,
                                out_ty: ty,
                                a,
                                dst,
                            });
                            Loc::Reg(dst)
                        }
                        _ if op.is_elementwise_binary() && ops.len() == 2 => {
                            let (a, b) = (arg(0)?, arg(1)?);
                            let dst = self.reg(ty);
                            let in_ty = self.tys[a as usize];
                            self.insts.push(SInst::Binary {
                                op,
                                ty: in_ty,
                                a,
                                b,
                                dst,
                            });
                            Loc::Reg(dst)
                        }
                        _ => return None,
                    }
                }
            };
            // Every leaf must have the declared element type.
            locs.insert(id, loc);
        }
        self.depth -= 1;
        locs.remove(&m.root(comp))
    }
}

fn flatten(l: &Loc, out: &mut Vec<u32>) {
    match l {
        Loc::Reg(r) => out.push(*r),
        Loc::Tuple(v) => v.iter().for_each(|x| flatten(x, out)),
    }
}

impl ScalarProg {
    /// Compiles `comp`, whose parameters must be scalars, or returns `None`.
    pub(crate) fn compile(m: &Module, comp: CompId) -> Option<ScalarProg> {
        let mut b = Builder {
            m,
            insts: Vec::new(),
            widths: Vec::new(),
            init: Vec::new(),
            tys: Vec::new(),
            depth: 0,
        };
        let mut params = Vec::new();
        let mut param_tys = Vec::new();
        let mut locs = Vec::new();
        for &p in m.params(comp) {
            if p.is_none() {
                return None;
            }
            let ty = scalar_ty(m.shape(p))?;
            let r = b.reg(ty);
            params.push(r);
            param_tys.push(ty);
            locs.push(Loc::Reg(r));
        }
        let root = b.compile(comp, &locs)?;
        let mut outputs = Vec::new();
        flatten(&root, &mut outputs);
        let fast = recognize(&b.insts, &params, &outputs);
        Some(ScalarProg {
            insts: b.insts,
            widths: b.widths,
            init: b.init,
            params,
            param_tys,
            outputs,
            fast,
        })
    }

    /// Whether the program is a comparator `compare(f(lhs...), f(rhs...))`; see [`KeySplit`].
    pub(crate) fn key_split(&self) -> Option<KeySplit> {
        if self.outputs.len() != 1 {
            return None;
        }
        let def: HashMap<u32, usize> = self
            .insts
            .iter()
            .enumerate()
            .map(|(i, inst)| (inst.regs().1, i))
            .collect();
        let pidx: HashMap<u32, usize> = self
            .params
            .iter()
            .enumerate()
            .map(|(k, &r)| (r, k))
            .collect();
        let SInst::Compare {
            dir, cty, ty, a, b, ..
        } = *self.insts.get(*def.get(&self.outputs[0])?)?
        else {
            return None;
        };
        fn same(
            p: &ScalarProg,
            def: &HashMap<u32, usize>,
            pidx: &HashMap<u32, usize>,
            a: u32,
            b: u32,
            depth: usize,
        ) -> bool {
            if depth > 64 {
                return false;
            }
            match (pidx.get(&a), pidx.get(&b)) {
                (Some(&ka), Some(&kb)) => ka % 2 == 0 && kb == ka + 1,
                (None, None) => match (def.get(&a), def.get(&b)) {
                    (Some(&ia), Some(&ib)) => {
                        let (x, y) = (&p.insts[ia], &p.insts[ib]);
                        let (xa, ya) = (x.regs().0, y.regs().0);
                        x.op_only() == y.op_only()
                            && xa
                                .iter()
                                .zip(&ya)
                                .all(|(&u, &v)| same(p, def, pidx, u, v, depth + 1))
                    }
                    // Constants.
                    (None, None) => p.init[a as usize] == p.init[b as usize],
                    _ => false,
                },
                _ => false,
            }
        }
        if !same(self, &def, &pidx, a, b, 0) {
            return None;
        }
        Some(KeySplit {
            lhs: a,
            dir,
            cty,
            ty,
            operand: pidx.get(&a).map(|k| k / 2),
        })
    }

    /// Fresh registers with the constants in place.
    pub(crate) fn regs(&self) -> Vec<Reg> {
        self.init.clone()
    }

    /// Runs the program on `regs`, whose parameter registers are filled in; `ftz` as for the
    /// elementwise kernels.
    pub(crate) fn run(&self, regs: &mut [Reg], ftz: bool) -> Result<(), String> {
        let w = |r: u32| self.widths[r as usize];
        for inst in &self.insts {
            match *inst {
                SInst::Unary {
                    op,
                    in_ty,
                    out_ty,
                    a,
                    dst,
                } => {
                    let x = regs[a as usize];
                    elementwise::unary(
                        op,
                        in_ty,
                        out_ty,
                        &x[..w(a)],
                        &mut regs[dst as usize][..w(dst)],
                        ftz,
                    )?;
                }
                SInst::Convert { from, to, a, dst } => {
                    let x = regs[a as usize];
                    elementwise::convert(
                        from,
                        to,
                        &x[..w(a)],
                        &mut regs[dst as usize][..w(dst)],
                        ftz,
                    )?;
                }
                SInst::Move { a, dst } => regs[dst as usize] = regs[a as usize],
                SInst::ReducePrecision { ty, eb, mb, a, dst } => {
                    let x = regs[a as usize];
                    elementwise::reduce_precision(
                        ty,
                        eb,
                        mb,
                        &x[..w(a)],
                        &mut regs[dst as usize][..w(dst)],
                    )?;
                }
                SInst::Binary { op, ty, a, b, dst } => {
                    let (x, y) = (regs[a as usize], regs[b as usize]);
                    elementwise::binary(
                        op,
                        ty,
                        &x[..w(a)],
                        &y[..w(b)],
                        &mut regs[dst as usize][..w(dst)],
                        ftz,
                    )?;
                }
                SInst::Compare {
                    dir,
                    cty,
                    ty,
                    a,
                    b,
                    dst,
                } => {
                    let (x, y) = (regs[a as usize], regs[b as usize]);
                    elementwise::compare(
                        dir,
                        cty,
                        ty,
                        &x[..w(a)],
                        &y[..w(b)],
                        &mut regs[dst as usize][..1],
                        ftz,
                    )?;
                }
                SInst::Select { p, a, b, dst } => {
                    regs[dst as usize] = if regs[p as usize][0] != 0 {
                        regs[a as usize]
                    } else {
                        regs[b as usize]
                    };
                }
                SInst::Clamp { ty, lo, x, hi, dst } => {
                    let (l, v, h) = (regs[lo as usize], regs[x as usize], regs[hi as usize]);
                    let n = w(dst);
                    elementwise::clamp(
                        ty,
                        &l[..n],
                        &v[..n],
                        &h[..n],
                        &mut regs[dst as usize][..n],
                        ftz,
                    )?;
                }
            }
        }
        Ok(())
    }
}

fn recognize(insts: &[SInst], params: &[u32], outputs: &[u32]) -> Fast {
    if outputs.len() != 1 {
        return Fast::None;
    }
    let out = outputs[0];
    if let Some(k) = params.iter().position(|&p| p == out) {
        return Fast::Param(k);
    }
    if insts.len() != 1 || params.len() != 2 {
        return Fast::None;
    }
    let (p0, p1) = (params[0], params[1]);
    match insts[0] {
        SInst::Binary { op, a, b, dst, .. } if dst == out => {
            let direct = a == p0 && b == p1;
            let swapped = a == p1 && b == p0;
            if direct || (swapped && op.is_commutative()) {
                Fast::Binary(op)
            } else {
                Fast::None
            }
        }
        _ => Fast::None,
    }
}
