//! `multi-output-fusion`: merges fusions into fusions with several outputs (a tuple root read
//! through `get-tuple-element`s), so one kernel writes values several kernels wrote before.
//!
//! Two rules, each asked of the target ([`crate::target::FusionTarget`], `target=NAME`):
//! - **producer**: a fusion or fusible instruction whose value is also needed outside its
//!   consumer fusion goes into that consumer, which then also outputs it (the consumer no longer
//!   reads it back from memory). The consumer must read it only at the index it computes (its
//!   fused uses of it are elementwise of the same shape).
//! - **siblings**: fusions and fusible instructions that read the same operand of at least the
//!   target's `sibling_min_bytes` become one fusion that reads it once, unless each side also
//!   reads a computed value (not a parameter or constant) larger than the shared one: one
//!   kernel would hold both of those live at once, where apart the schedule can finish one
//!   before the other is made (slices of a batch split sharing a mask), to save one read of a
//!   smaller array.
//!
//! Producer merges run before the sibling merges and once more after them, since sibling
//! merges can put every user of a producer into one group (a clipped gradient read by the
//! first and second moments' updates); a producer with no user outside the group is no output.
//!
//! Merged outputs must be ones the target can write in one pass (`multi_output_compatible`, on
//! every backend so far: the same dimensions), at most `max_outputs` of them. Output fusions
//! and fusions that already have a tuple root are left alone.
//!
//! Cycles are ruled out without reachability queries. Every instruction gets a level (one more
//! than its deepest operand), so a path strictly climbs levels. Groups of merged instructions
//! keep a label such that every edge leaving the group goes to a higher label and every edge
//! entering comes from a lower one. Siblings merge only at equal labels, so no path can run
//! from one to the other; a producer merges into a consumer only when all its other users have
//! labels above the consumer's, and the merged group takes the consumer's label. Merged groups
//! live in a `SlotMap` (they merge and disappear as the sweep goes).
//!
//! Read phase: candidates and levels (parallel over computations). Then producer merges in
//! topological order, then sibling merges operand by operand, both sequential and linear in the
//! uses they look at. Write phase: each group of two or more becomes one fusion through
//! [`crate::outline`]; every member's output used outside the group is forwarded to a
//! `get-tuple-element` of it; merged fusions' old computations are removed when nothing else
//! calls them.
//!
//! Pre-conditions: a valid module. Post-conditions: the same values; no cycle.
//!
//! Counters: `producer_merges`, `sibling_merges`, `multi_output_fusions`, `outputs`.

use std::sync::Arc;

use axle_analysis::Users;
use axle_ir::entity::{dense_map, EntitySet, SecondaryMap};
use axle_ir::passes::Structure;
use axle_ir::{
    AttrKey, AttrValue, Changed, CompId, FusionKind, InstId, Module, NewInst, Opcode, Pass, PassCx,
    PassError,
};
use rayon::prelude::*;
use slotmap::{new_key_type, SlotMap};

use crate::fusion::{classify, control_predecessors, read_of, Class, Read};
use crate::outline::{Outliner, Placement};
use crate::target::{FusionRule, FusionTarget};

/// The `multi-output-fusion` pass.
pub struct MultiOutputFusion {
    target: Result<Arc<dyn FusionTarget>, String>,
}

impl MultiOutputFusion {
    /// The pass for `target` (an error names a target no backend provides; the pass reports it
    /// when it runs).
    pub fn new(target: Result<Arc<dyn FusionTarget>, String>) -> MultiOutputFusion {
        MultiOutputFusion { target }
    }
}

new_key_type! {
    struct GroupKey;
}

/// Merged instructions and their label.
struct Group {
    members: Vec<InstId>,
    label: u32,
}

fn fusion_kind(m: &Module, i: InstId) -> Option<FusionKind> {
    match m.attr(i, &AttrKey::Kind) {
        Some(AttrValue::FusionKind(k)) => Some(*k),
        _ => None,
    }
}

/// Whether `i` may be merged: a loop or input fusion with an array root and no control
/// dependencies inside, or an instruction the fusion pass could make a fusion of.
fn mergeable(m: &Module, i: InstId, class: Class, body_ctrl: &dyn Fn(CompId) -> bool) -> bool {
    if m.opcode(i) == Opcode::Fusion {
        let Some(body) = m.comp_attr(i, &AttrKey::Calls) else {
            return false;
        };
        return matches!(
            fusion_kind(m, i),
            Some(FusionKind::Loop) | Some(FusionKind::Input)
        ) && m.array_shape(i).is_some()
            && m.control_predecessors(i).is_empty()
            && !body_ctrl(body);
    }
    matches!(class, Class::Loop | Class::Reduce) && m.array_shape(i).is_some()
}

/// Whether `f` reads its operand `p` only at the index it computes.
fn reads_in_place(m: &Module, users: &Users, f: InstId, p: InstId) -> bool {
    let slots = m
        .operands(f)
        .iter()
        .enumerate()
        .filter(|(_, &o)| o == p)
        .map(|(k, _)| k);
    if m.opcode(f) != Opcode::Fusion {
        return slots.into_iter().all(|k| read_of(m, f, k, p) == Read::Same);
    }
    let Some(body) = m.comp_attr(f, &AttrKey::Calls) else {
        return false;
    };
    let params = m.params(body);
    let root = m.root(body);
    let same_dims = m.array_shape(root).map(|a| &a.dims) == m.array_shape(p).map(|a| &a.dims);
    same_dims
        && slots.into_iter().all(|k| {
            let Some(&param) = params.get(k) else {
                return false;
            };
            users.users(param).iter().all(|&u| {
                m.operands(u)
                    .iter()
                    .enumerate()
                    .filter(|(_, &o)| o == param)
                    .all(|(s, _)| read_of(m, u, s, param) == Read::Same)
            })
        })
}

struct Merger<'a> {
    m: &'a Module,
    users: &'a Users,
    target: &'a dyn FusionTarget,
    level: &'a SecondaryMap<InstId, u32>,
    groups: SlotMap<GroupKey, Group>,
    group_of: SecondaryMap<InstId, Option<GroupKey>>,
    producer_merges: u64,
    sibling_merges: u64,
    /// Scratch of the sibling search, reused from operand to operand.
    heads: hashbrown::HashMap<u32, Vec<GroupKey>>,
    seen: hashbrown::HashSet<GroupKey>,
}

impl Merger<'_> {
    fn label(&self, i: InstId) -> u32 {
        match self.group_of[i] {
            Some(g) => self.groups[g].label,
            None => self.level[i],
        }
    }

    fn group(&mut self, i: InstId) -> GroupKey {
        if let Some(g) = self.group_of[i] {
            return g;
        }
        let g = self.groups.insert(Group {
            members: vec![i],
            label: self.level[i],
        });
        self.group_of[i] = Some(g);
        g
    }

    /// Whether the members of `a` and `b` can be outputs of one fusion.
    fn compatible(&self, a: GroupKey, b: GroupKey) -> bool {
        let (ga, gb) = (&self.groups[a], &self.groups[b]);
        ga.members.len() + gb.members.len() <= self.target.costs().max_outputs
            && self
                .target
                .multi_output_compatible(self.m, ga.members[0], gb.members[0])
    }

    /// Moves every member of `from` into `into`, which takes `label`.
    fn merge(&mut self, from: GroupKey, into: GroupKey, label: u32) {
        let moved = self.groups.remove(from).map_or(Vec::new(), |g| g.members);
        for &i in &moved {
            self.group_of[i] = Some(into);
        }
        let g = &mut self.groups[into];
        g.members.extend(moved);
        g.label = label;
    }

    /// Merges producer `p` into the first consumer that allows it. Only producers with at most
    /// [`MAX_PRODUCER_USES`] uses are considered, and at most [`MAX_TRIES`] consumers each, so
    /// the checks stay linear in the module.
    fn producer(&mut self, p: InstId, candidate: &impl Fn(InstId) -> bool) {
        let us = self.users.users(p);
        if us.len() > MAX_PRODUCER_USES {
            return;
        }
        let mut tries = 0;
        for (t, &f) in us.iter().enumerate() {
            // A user appears once per use, its uses side by side.
            if (t > 0 && us[t - 1] == f) || !candidate(f) {
                continue;
            }
            tries += 1;
            if tries > MAX_TRIES {
                return;
            }
            let gp = self.group(p);
            let gf = self.group(f);
            if gp == gf || !self.compatible(gp, gf) || !reads_in_place(self.m, self.users, f, p) {
                continue;
            }
            let lf = self.groups[gf].label;
            // Every edge leaving the producer's group, other than into the consumer's, must
            // climb above the consumer's label.
            let ok = self.groups[gp].members.iter().all(|&q| {
                self.users.users(q).iter().all(|&u| {
                    let gu = self.group_of[u];
                    gu == Some(gp) || gu == Some(gf) || self.label(u) > lf
                })
            });
            if ok {
                self.merge(gp, gf, lf);
                self.producer_merges += 1;
                return;
            }
        }
    }

    /// The bytes of the largest value a member of `g` reads that is computed outside `g`
    /// (neither a parameter nor a constant), other than `shared`.
    fn private_bytes(&self, g: GroupKey, shared: InstId) -> f64 {
        let m = self.m;
        self.groups[g]
            .members
            .iter()
            .flat_map(|&i| m.operands(i).iter().copied())
            .filter(|&o| {
                o != shared
                    && self.group_of[o] != Some(g)
                    && !matches!(m.opcode(o), Opcode::Parameter | Opcode::Constant)
            })
            .map(|o| axle_analysis::result_bytes(m, o))
            .fold(0.0, f64::max)
    }

    /// Merges the candidate users of `x` that sit at equal labels (each user is compared with
    /// at most [`MAX_TRIES`] earlier groups of its label), except pairs that each read a
    /// computed value larger than `x` (merging them would hold both live to save a read of
    /// `x`).
    fn siblings(&mut self, x: InstId, candidate: &impl Fn(InstId) -> bool) {
        let us = self.users.users(x);
        if us.len() < 2 {
            return;
        }
        let mut heads = std::mem::take(&mut self.heads);
        let mut seen = std::mem::take(&mut self.seen);
        heads.clear();
        seen.clear();
        for (t, &u) in us.iter().enumerate() {
            if (t > 0 && us[t - 1] == u) || !candidate(u) {
                continue;
            }
            let gu = self.group(u);
            if !seen.insert(gu) {
                continue;
            }
            let lu = self.groups[gu].label;
            let shared = axle_analysis::result_bytes(self.m, x);
            let apart = self.private_bytes(gu, x) > shared;
            let list = heads.entry(lu).or_default();
            let into = list.iter().take(MAX_TRIES).copied().find(|&h| {
                self.groups.contains_key(h)
                    && self.compatible(gu, h)
                    && !(apart && self.private_bytes(h, x) > shared)
            });
            match into {
                Some(h) => {
                    self.merge(gu, h, lu);
                    self.sibling_merges += 1;
                }
                None => list.push(gu),
            }
        }
        self.heads = heads;
        self.seen = seen;
    }
}

/// The most uses a producer may have for a producer merge to be tried.
const MAX_PRODUCER_USES: usize = 32;

/// The most merge partners tried per producer or sibling.
const MAX_TRIES: usize = 4;

impl Pass for MultiOutputFusion {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let target = self.target.clone().map_err(PassError::new)?;
        let producers = target.supports(FusionRule::ProducerMultiOutput);
        let siblings = target.supports(FusionRule::SiblingMultiOutput);
        if !producers && !siblings {
            return Ok(false);
        }
        let s = cx.analysis::<Structure>(m);
        let users = cx.analysis::<Users>(m);
        let live = m.live_ids();
        let eligible = crate::fusion::eligible_computations(m, &live);
        let ctrl = control_predecessors(m, &live);
        // Fused computations with control dependencies inside, and how many fusions call each.
        let mut calls: SecondaryMap<CompId, u32> = dense_map(m.comp_capacity(), 0);
        for &i in &live {
            if m.opcode(i) == Opcode::Fusion {
                for c in m.called_comps_iter(i) {
                    if c.index() < m.comp_capacity() {
                        calls[c] += 1;
                    }
                }
            }
        }
        let body_ctrl = |c: CompId| {
            s.by_comp[c]
                .iter()
                .any(|&i| !m.control_predecessors(i).is_empty())
        };
        let cand_ids: Vec<InstId> = (0..m.inst_capacity())
            .into_par_iter()
            .map(InstId::new)
            .filter(|&i| {
                m.is_live(i) && {
                    let c = m.parent(i);
                    !c.is_none()
                        && eligible.contains(c)
                        && !ctrl.contains(i)
                        && mergeable(m, i, classify(m, i, &*target, &eligible, &ctrl), &body_ctrl)
                }
            })
            .collect();
        let mut cand: EntitySet<InstId> = EntitySet::with_capacity(m.inst_capacity());
        cand.extend(cand_ids);
        let comps: Vec<CompId> = (0..m.comp_capacity())
            .map(CompId::new)
            .filter(|&c| eligible.contains(c))
            .collect();
        // Levels: one more than the deepest operand (a sweep in topological order).
        let mut level: SecondaryMap<InstId, u32> = dense_map(m.inst_capacity(), 0);
        for &c in &comps {
            for &i in &s.topo[c] {
                level[i] = m
                    .operands(i)
                    .iter()
                    .map(|&o| level[o] + 1)
                    .max()
                    .unwrap_or(0);
            }
        }
        let mut mg = Merger {
            m,
            users: &users,
            target: &*target,
            level: &level,
            groups: SlotMap::with_key(),
            group_of: dense_map(m.inst_capacity(), None),
            producer_merges: 0,
            sibling_merges: 0,
            heads: hashbrown::HashMap::new(),
            seen: hashbrown::HashSet::new(),
        };
        let candidate = |i: InstId| cand.contains(i);
        let min_bytes = target.costs().sibling_min_bytes as f64;
        for &c in &comps {
            let order = &s.topo[c];
            if producers {
                for &p in order {
                    if candidate(p) {
                        mg.producer(p, &candidate);
                    }
                }
            }
            if siblings {
                for &x in order {
                    if axle_analysis::result_bytes(m, x) >= min_bytes {
                        mg.siblings(x, &candidate);
                    }
                }
                if producers {
                    for &p in order {
                        if candidate(p) {
                            mg.producer(p, &candidate);
                        }
                    }
                }
            }
        }
        cx.count("producer_merges", mg.producer_merges);
        cx.count("sibling_merges", mg.sibling_merges);
        if mg.producer_merges + mg.sibling_merges == 0 {
            return Ok(false);
        }
        // Write phase: groups in the topological order of their first member.
        let mut pos: SecondaryMap<InstId, u32> = dense_map(m.inst_capacity(), 0);
        for &c in &comps {
            for (k, &i) in s.topo[c].iter().enumerate() {
                pos[i] = k as u32;
            }
        }
        let group_of = std::mem::take(&mut mg.group_of);
        let mut groups = std::mem::take(&mut mg.groups);
        let mut todo: Vec<(CompId, Vec<InstId>)> = Vec::new();
        for &c in &comps {
            for &i in &s.topo[c] {
                if let Some(g) = group_of[i] {
                    if let Some(mut grp) = groups.remove(g) {
                        if grp.members.len() > 1 {
                            grp.members.sort_by_key(|&x| pos[x]);
                            todo.push((c, grp.members));
                        }
                    }
                }
            }
        }
        let body_order = |c: CompId| s.topo[c].clone();
        let mut outliner = Outliner::new(m);
        let mut rw = m.rewriter();
        let mut old_bodies: Vec<CompId> = Vec::new();
        for (comp, members) in todo {
            let md = rw.module();
            let in_group = |u: InstId| members.contains(&u);
            let outputs: Vec<InstId> = members
                .iter()
                .copied()
                .filter(|&i| users.is_root(i) || users.users(i).iter().any(|&u| !in_group(u)))
                .collect();
            let has_reduce = members.iter().any(|&i| {
                md.opcode(i) == Opcode::Reduce || fusion_kind(md, i) == Some(FusionKind::Input)
            });
            let kind = if has_reduce {
                FusionKind::Input
            } else {
                FusionKind::Loop
            };
            let keep = |i: InstId| {
                md.comp_attr(i, &AttrKey::Calls)
                    .is_none_or(|b| calls[b] == 1)
            };
            for &i in &members {
                if let Some(b) = md.comp_attr(i, &AttrKey::Calls) {
                    if calls[b] == 1 {
                        old_bodies.push(b);
                    }
                }
            }
            let keep: Vec<bool> = members.iter().map(|&i| keep(i)).collect();
            let placement = |i: InstId| Placement::Copy {
                keep_name: members
                    .iter()
                    .position(|&x| x == i)
                    .is_some_and(|k| keep[k]),
            };
            let f = outliner.outline(
                &mut rw, comp, &members, &outputs, kind, placement, body_order,
            );
            cx.count("multi_output_fusions", 1);
            cx.count("outputs", outputs.len() as u64);
            if let [one] = outputs[..] {
                rw.replace_all_uses(one, f);
            } else {
                for (k, &o) in outputs.iter().enumerate() {
                    let md = rw.module();
                    let (sh, l) = (md.shape_id(o), md.layout_id(o));
                    let g = rw.add(
                        comp,
                        NewInst {
                            opcode: Opcode::GetTupleElement,
                            shape: sh,
                            layout: l,
                            operands: vec![f],
                            attrs: vec![(AttrKey::Index, AttrValue::Int(k as i64))],
                            name: None,
                        },
                    );
                    rw.replace_all_uses(o, g);
                }
            }
            for &i in &members {
                if !outputs.contains(&i) {
                    rw.remove(i);
                }
            }
        }
        old_bodies.sort();
        old_bodies.dedup();
        rw.module_mut().remove_computations(&old_bodies);
        Ok(rw.finish())
    }
}
