//! Outlining: turning a group of instructions of one computation into a `fusion` instruction
//! and its fused computation, in a write phase (both fusion passes use it).
//!
//! The group's members are moved or copied (as the caller says), in the topological order the
//! caller gives, into a new computation named `fused_computation` (with a numeric suffix when the name is taken). Every
//! operand of a member that is not itself a member becomes a parameter of the new computation
//! (one per distinct value, numbered in order of first use; a scalar constant is copied in
//! instead); the fusion instruction takes those
//! values as its operands, resolved through the rewriter's forwarding. A member that is itself a
//! `fusion` is spliced: its fused computation's body is copied in with its parameters bound to
//! the member's operands, so merging fusions (multi-output fusion) yields one flat computation.
//! The fused root is the copy of the single output, or a tuple of the outputs' copies.
//!
//! The outliner only builds: forwarding the outputs' uses to the fusion (or to
//! `get-tuple-element`s of it) and removing the members is the caller's write phase, since only
//! the caller knows which members are needed elsewhere.
//!
//! Membership is a dense stamp per instruction id (ids below the module's capacity when the
//! outliner was made), so outlining is linear in the members and their operands.

use axle_ir::entity::{dense_map, SecondaryMap};
use hashbrown::{HashMap, HashSet};

use axle_ir::{
    AttrKey, AttrValue, CompId, FusionKind, InstId, Layout, Module, NewInst, Opcode, Rewriter,
    Shape,
};

/// What happens to a member of an outlined group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// It moves into the fused computation (its id, name and attributes stay; it must be used
    /// by nothing outside the group, and the caller must not remove it).
    Move,
    /// It is copied; the copy takes the original's name when `keep_name` (the caller then
    /// removes or forwards the original).
    Copy {
        /// Whether the copy takes the original's name.
        keep_name: bool,
    },
}

/// Outlines groups of instructions into fusions.
pub struct Outliner {
    stamp: SecondaryMap<InstId, u32>,
    copy: SecondaryMap<InstId, InstId>,
    /// For operands outside the group: the serial of the group that last made a parameter (or
    /// copied constant) for them, and that value.
    ext_stamp: SecondaryMap<InstId, u32>,
    ext: SecondaryMap<InstId, InstId>,
    /// Reused buffers for the name and the attributes of each new instruction.
    name: String,
    attrs: Vec<axle_ir::Attr>,
    serial: u32,
    taken: HashSet<String>,
    next_name: usize,
}

impl Outliner {
    /// An outliner for `m` (its current instructions may be members).
    pub fn new(m: &Module) -> Outliner {
        let n = m.inst_capacity();
        let taken = m
            .computations()
            .into_iter()
            .map(|c| m.comp_name(c).to_string())
            .collect();
        Outliner {
            stamp: dense_map(n, 0),
            copy: dense_map(n, InstId::NONE),
            ext_stamp: dense_map(n, 0),
            ext: dense_map(n, InstId::NONE),
            name: String::new(),
            attrs: Vec::new(),
            serial: 0,
            taken,
            next_name: 0,
        }
    }

    fn comp_name(&mut self) -> String {
        loop {
            let name = if self.next_name == 0 {
                "fused_computation".to_string()
            } else {
                format!("fused_computation.{}", self.next_name)
            };
            self.next_name += 1;
            if self.taken.insert(name.clone()) {
                return name;
            }
        }
    }

    /// Builds the fusion of `members` (instructions of computation `comp`, in topological
    /// order) whose values `outputs` (members) leave it, with fusion kind `kind`. Each member is
    /// moved or copied as `placement(member)` says; a `fusion` member is always spliced (its
    /// body copied, with its names when the placement keeps names). `body_order(c)` gives a
    /// fused computation's live instructions in topological order. Returns the new fusion
    /// instruction, created in `comp` without a name.
    #[allow(clippy::too_many_arguments)]
    pub fn outline(
        &mut self,
        rw: &mut Rewriter<'_>,
        comp: CompId,
        members: &[InstId],
        outputs: &[InstId],
        kind: FusionKind,
        placement: impl Fn(InstId) -> Placement,
        body_order: impl Fn(CompId) -> Vec<InstId>,
    ) -> InstId {
        self.serial += 1;
        let serial = self.serial;
        for &i in members {
            self.stamp[i] = serial;
        }
        let name = self.comp_name();
        let fc = rw.module_mut().add_computation(&name);
        // External operands, in order of first use.
        let mut params: Vec<InstId> = Vec::new();
        let mut ops: Vec<InstId> = Vec::new();
        for &i in members {
            ops.clear();
            let n_ops = rw.module().operands(i).len();
            for k in 0..n_ops {
                let o = rw.module().operands(i)[k];
                let v = if self.stamp[o] == serial {
                    self.copy[o]
                } else if self.ext_stamp[o] == serial {
                    self.ext[o]
                } else {
                    let r = rw.resolve(o);
                    let md = rw.module_mut();
                    // A scalar constant is copied in rather than passed.
                    let p = if md.opcode(r) == Opcode::Constant
                        && md.array_shape(r).is_some_and(|a| a.num_elements() == 1)
                    {
                        copy_inst(md, fc, r, &[], false, &mut self.name, &mut self.attrs)
                    } else {
                        params.push(r);
                        make_param(md, fc, r, params.len() - 1, &mut self.attrs)
                    };
                    self.ext_stamp[o] = serial;
                    self.ext[o] = p;
                    p
                };
                ops.push(v);
            }
            let md = rw.module_mut();
            let c = match placement(i) {
                _ if md.opcode(i) == Opcode::Fusion => {
                    let keep = placement(i) != Placement::Copy { keep_name: false };
                    splice(
                        md,
                        fc,
                        i,
                        &ops,
                        keep,
                        &body_order,
                        &mut self.name,
                        &mut self.attrs,
                    )
                }
                Placement::Move => {
                    md.set_parent(i, fc);
                    md.set_operands(i, &ops);
                    i
                }
                Placement::Copy { keep_name } => {
                    copy_inst(md, fc, i, &ops, keep_name, &mut self.name, &mut self.attrs)
                }
            };
            self.copy[i] = c;
        }
        let m = rw.module_mut();
        let root = if let [one] = outputs {
            self.copy[*one]
        } else {
            let elems: Vec<InstId> = outputs.iter().map(|&o| self.copy[o]).collect();
            let shapes: Vec<_> = elems.iter().map(|&e| m.shape_id(e)).collect();
            let layouts: Vec<_> = elems.iter().map(|&e| m.layout_id(e)).collect();
            let s = m.intern_shape(Shape::Tuple(shapes.into()));
            let l = m.intern_layout(Layout::Tuple(layouts.into()));
            m.push_inst(
                fc,
                NewInst {
                    opcode: Opcode::Tuple,
                    shape: s,
                    layout: l,
                    operands: elems,
                    attrs: Vec::new(),
                    name: None,
                },
            )
        };
        m.set_root(fc, root);
        let (s, l) = (m.shape_id(root), m.layout_id(root));
        m.push_inst(
            comp,
            NewInst {
                opcode: Opcode::Fusion,
                shape: s,
                layout: l,
                operands: params,
                attrs: vec![
                    (AttrKey::Kind, AttrValue::FusionKind(kind)),
                    (AttrKey::Calls, AttrValue::Comp(fc)),
                ],
                name: None,
            },
        )
    }
}

/// Parameter `k` of computation `fc`, shaped like `like` (`attrs` is a reusable buffer).
fn make_param(
    m: &mut Module,
    fc: CompId,
    like: InstId,
    k: usize,
    attrs: &mut Vec<axle_ir::Attr>,
) -> InstId {
    let (s, l) = (m.shape_id(like), m.layout_id(like));
    attrs.clear();
    attrs.push((AttrKey::ParameterNumber, AttrValue::Int(k as i64)));
    m.push_inst_parts(fc, Opcode::Parameter, s, l, &[], attrs, "")
}

/// A copy of `i` in computation `fc` with operands `ops` (`name` and `attrs` are reusable
/// buffers).
fn copy_inst(
    m: &mut Module,
    fc: CompId,
    i: InstId,
    ops: &[InstId],
    keep_name: bool,
    name: &mut String,
    attrs: &mut Vec<axle_ir::Attr>,
) -> InstId {
    attrs.clear();
    attrs.extend_from_slice(m.attrs(i));
    let (op, s, l) = (m.opcode(i), m.shape_id(i), m.layout_id(i));
    name.clear();
    if keep_name {
        name.push_str(m.name(i));
    }
    let value = if op == Opcode::Constant {
        m.constant(i).cloned()
    } else {
        None
    };
    let c = m.push_inst_parts(fc, op, s, l, ops, attrs, name);
    if let Some(v) = value {
        m.set_constant(c, v);
    }
    c
}

/// Copies the body of fusion `f` into `fc` with its parameters bound to `ops`; returns the
/// copy of its root.
#[allow(clippy::too_many_arguments)]
fn splice(
    m: &mut Module,
    fc: CompId,
    f: InstId,
    ops: &[InstId],
    keep_names: bool,
    body_order: &impl Fn(CompId) -> Vec<InstId>,
    name: &mut String,
    attrs: &mut Vec<axle_ir::Attr>,
) -> InstId {
    let Some(body) = m.comp_attr(f, &AttrKey::Calls) else {
        return copy_inst(m, fc, f, ops, keep_names, name, attrs);
    };
    let mut map: HashMap<InstId, InstId> = HashMap::new();
    let mut bops: Vec<InstId> = Vec::new();
    for b in body_order(body) {
        if m.opcode(b) == Opcode::Parameter {
            let k = m.parameter_number(b).unwrap_or(0).max(0) as usize;
            if let Some(&v) = ops.get(k) {
                map.insert(b, v);
            }
            continue;
        }
        bops.clear();
        bops.extend(
            m.operands(b)
                .iter()
                .map(|o| map.get(o).copied().unwrap_or(*o)),
        );
        let c = copy_inst(m, fc, b, &bops, keep_names, name, attrs);
        map.insert(b, c);
    }
    let root = m.root(body);
    map.get(&root).copied().unwrap_or(root)
}
