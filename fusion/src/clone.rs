//! Copying shapes, layouts and computations from one module into another (constant folding
//! builds a small module per folded instruction for the evaluator).

use hashbrown::HashMap;

use axle_ir::{AttrValue, CompId, InstId, InstsByComp, Layout, LayoutId, Module, Shape, ShapeId};

/// The id in `dst` of shape `s` of `src` (tuple elements copied recursively).
pub fn copy_shape(src: &Module, dst: &mut Module, s: ShapeId) -> ShapeId {
    let shape = match src.shape_of(s) {
        Shape::Tuple(es) => {
            let es: Vec<ShapeId> = es.iter().map(|&e| copy_shape(src, dst, e)).collect();
            Shape::Tuple(es.into())
        }
        other => other.clone(),
    };
    dst.intern_shape(shape)
}

/// The id in `dst` of layout `l` of `src`.
pub fn copy_layout(src: &Module, dst: &mut Module, l: LayoutId) -> LayoutId {
    let layout = match src.layout_of(l) {
        Layout::Tuple(ls) => {
            let ls: Vec<LayoutId> = ls.iter().map(|&e| copy_layout(src, dst, e)).collect();
            Layout::Tuple(ls.into())
        }
        other => other.clone(),
    };
    dst.intern_layout(layout)
}

/// Attributes of `i` with computations mapped through `comps`.
pub fn mapped_attrs(
    src: &Module,
    i: InstId,
    comps: &HashMap<CompId, CompId>,
    insts: &HashMap<InstId, InstId>,
) -> Vec<axle_ir::Attr> {
    src.attrs(i)
        .iter()
        .map(|(k, v)| {
            let v = match v {
                AttrValue::Comp(c) => AttrValue::Comp(comps.get(c).copied().unwrap_or(*c)),
                AttrValue::Comps(cs) => AttrValue::Comps(
                    cs.iter()
                        .map(|c| comps.get(c).copied().unwrap_or(*c))
                        .collect(),
                ),
                AttrValue::Insts(is) => {
                    AttrValue::Insts(is.iter().filter_map(|i| insts.get(i).copied()).collect())
                }
                other => other.clone(),
            };
            (k.clone(), v)
        })
        .collect()
}

/// Copies computation `c` of `src`, and every computation it calls (once each, through
/// `map`), into `dst`; returns the copy of `c`. `by_comp` is `src.insts_by_comp()`.
pub fn copy_computation(
    src: &Module,
    by_comp: &InstsByComp,
    c: CompId,
    dst: &mut Module,
    map: &mut HashMap<CompId, CompId>,
) -> CompId {
    if let Some(&d) = map.get(&c) {
        return d;
    }
    let insts = local_topo_order(src, &by_comp[c]);
    for &i in &insts {
        let mut callees = Vec::new();
        axle_ir::passes::for_each_callee(src, i, |cc| callees.push(cc));
        for cc in callees {
            copy_computation(src, by_comp, cc, dst, map);
        }
    }
    let d = dst.add_computation(src.comp_name(c));
    map.insert(c, d);
    let mut imap: HashMap<InstId, InstId> = HashMap::new();
    for &i in &insts {
        let ops: Vec<InstId> = src.operands(i).iter().map(|o| imap[o]).collect();
        let mut attrs = mapped_attrs(src, i, map, &imap);
        let s = copy_shape(src, dst, src.shape_id(i));
        let l = copy_layout(src, dst, src.layout_id(i));
        let n = dst.push_inst_parts(d, src.opcode(i), s, l, &ops, &mut attrs, src.name(i));
        if let Some(v) = src.constant(i) {
            dst.set_constant(n, v.clone());
        }
        imap.insert(i, n);
    }
    let r = src.root(c);
    if let Some(&nr) = imap.get(&r) {
        dst.set_root(d, nr);
    }
    d
}

/// `insts` (instructions of one computation) in a stable topological order: operands and control
/// predecessors first, the given order otherwise. Its cost depends only on `insts`, not on the
/// size of the module.
pub fn local_topo_order(m: &Module, insts: &[InstId]) -> Vec<InstId> {
    local_topo_order_with(m, insts, |i| i)
}

/// [`local_topo_order`] where operands are first mapped through `resolve` (a rewriter's
/// forwarding, during a write phase).
pub fn local_topo_order_with(
    m: &Module,
    insts: &[InstId],
    resolve: impl Fn(InstId) -> InstId,
) -> Vec<InstId> {
    let pos: HashMap<InstId, usize> = insts.iter().enumerate().map(|(k, &i)| (i, k)).collect();
    let mut state = vec![0u8; insts.len()];
    let mut order = Vec::with_capacity(insts.len());
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for start in 0..insts.len() {
        if state[start] != 0 {
            continue;
        }
        state[start] = 1;
        stack.push((start, 0));
        while let Some((k, next)) = stack.pop() {
            let i = insts[k];
            let ops = m.operands(i);
            let dep = if next < ops.len() {
                Some(ops[next])
            } else {
                m.control_predecessors(i).get(next - ops.len()).copied()
            };
            match dep.map(&resolve) {
                Some(d) => {
                    stack.push((k, next + 1));
                    if let Some(&j) = pos.get(&d) {
                        if state[j] == 0 {
                            state[j] = 1;
                            stack.push((j, 0));
                        }
                    }
                }
                None => {
                    state[k] = 2;
                    order.push(i);
                }
            }
        }
    }
    order
}
