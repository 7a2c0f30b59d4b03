//! The per-device program of a module compiled for several devices: what one device runs on
//! the shards PJRT hands it.
//!
//! JAX compiles a `shard_map` (and `pmap`, which JAX 0.10 lowers through `shard_map`) as a
//! module over global shapes: each entry parameter carries its `sharding`, the custom call
//! `xla.sdy.GlobalToLocalShape` turns global values into the per-device values the body (a
//! `call`) works on, `xla.sdy.LocalToGlobalShape` turns the body's results back, and
//! `xla.sdy.FuncResultSharding` marks the results' shardings. Through PJRT the compiler is the
//! partitioner: every device's arguments are already its shards, and its results must be its
//! shards. [`per_device`] rewrites the entry so: each sharded parameter takes its shard's shape,
//! the three custom calls become what they mean on one device (their operands, as they are),
//! and tuples and `get-tuple-element`s follow. The body is untouched.
//!
//! Invariants:
//! - The outcome computes, on each device, exactly that device's shards of the global results;
//!   anything that would need automatic partitioning (an instruction of the entry working on a
//!   sharded global value, a non-replicated `sharding` on an instruction of the entry, a
//!   `shard_map` leaving mesh axes to the partitioner, a sharding that does not divide its
//!   dimensions evenly) is an error naming the instruction, never a wrong shape or answer.
//! - The shardings of arguments and results are handed back for the executable's optimized
//!   program ([`PerDevice::param_shardings`], [`PerDevice::output_sharding`]), from which PJRT
//!   clients read them: a parameter's own `sharding`, else the `xla.sdy.in_shardings` of the
//!   `shard_map` it enters (JAX leaves parameters unannotated when a jit has no in_shardings),
//!   else replicated; the root's own, else per result the `xla.sdy.out_shardings` of the
//!   `shard_map` result it is, else replicated ([`op_sharding_of`] turns Shardy's form into
//!   XLA's).
//! - A module for one device is returned unchanged.

use std::collections::HashSet;

use axle::ir::sdy::{Mesh, Sharding};
use axle::ir::{AttrKey, AttrValue, ElementType, InstId, Module, NewInst, Opcode, Shape, ShapeId};
use axle_hlo_proto::verbatim::parse_sharding;
use pjrt_sys::protos::xla::{op_sharding, OpSharding};

use crate::error::{PluginError, PluginResult};

/// A module rewritten for one of its devices, with the shardings it was written with.
#[derive(Debug)]
pub struct PerDevice {
    /// The per-device module.
    pub module: Module,
    /// Each entry parameter's sharding, in parameter order, when every parameter has one.
    pub param_shardings: Option<Vec<OpSharding>>,
    /// The entry root's sharding (a tuple sharding for a tuple root), when it has one.
    pub output_sharding: Option<OpSharding>,
}

/// The custom call that hands a `shard_map` body its per-device arguments.
const GLOBAL_TO_LOCAL: &str = "xla.sdy.GlobalToLocalShape";
/// The custom call that takes a `shard_map` body's per-device results back.
const LOCAL_TO_GLOBAL: &str = "xla.sdy.LocalToGlobalShape";
/// The custom call marking an entry result's sharding.
const RESULT_SHARDING: &str = "xla.sdy.FuncResultSharding";

fn refuse(m: &Module, id: InstId, why: &str) -> PluginError {
    PluginError::unimplemented(format!(
        "axle: %{} ({}) {why}: automatic SPMD partitioning of non-manual shardings is not \
         supported; axle runs shard_map and pmap programs (the per-device code written by hand)",
        m.name(id),
        m.opcode(id).name()
    ))
}

fn target(m: &Module, id: InstId) -> Option<&str> {
    if m.opcode(id) != Opcode::CustomCall {
        return None;
    }
    match m.attr(id, &AttrKey::CustomCallTarget) {
        Some(AttrValue::Str(s)) => Some(s),
        _ => None,
    }
}

/// The `sharding` of instruction `id`, read as an `OpSharding` (None: none, or one this plugin
/// cannot read, which the caller treats as needing partitioning when it matters).
fn sharding(m: &Module, id: InstId) -> Option<OpSharding> {
    match m.attr(id, &AttrKey::Sharding) {
        Some(AttrValue::Raw(t)) => parse_sharding(t),
        _ => None,
    }
}

fn replicated() -> OpSharding {
    OpSharding {
        r#type: op_sharding::Type::Replicated as i32,
        ..Default::default()
    }
}

/// Shardy's sharding `s` over `mesh` as XLA's `OpSharding`: each dimension split into the
/// product of its axes' sizes, the devices in the order of those axes (dimension by dimension,
/// major first), the mesh axes no dimension uses as a last, replicated tile dimension.
pub fn op_sharding_of(mesh: &Mesh, s: &Sharding) -> Result<OpSharding, String> {
    let index = |name: &str| {
        mesh.axes
            .iter()
            .position(|a| a.0 == name)
            .ok_or_else(|| format!("mesh {} has no axis \"{name}\"", mesh.name))
    };
    let mut perm = Vec::new();
    let mut tiles = Vec::new();
    for dim in &s.dims {
        let mut t = 1i64;
        for a in dim {
            let k = index(a)?;
            if perm.contains(&k) {
                return Err(format!("axis \"{a}\" shards two dimensions"));
            }
            perm.push(k);
            t *= mesh.axes[k].1;
        }
        tiles.push(t);
    }
    if tiles.iter().all(|&t| t == 1) {
        return Ok(replicated());
    }
    let mut rep = 1i64;
    for k in 0..mesh.axes.len() {
        if !perm.contains(&k) {
            perm.push(k);
            rep *= mesh.axes[k].1;
        }
    }
    // Device d of the mesh has coordinates d in mixed radix over the axes, the first major.
    let mut stride = vec![1i64; mesh.axes.len()];
    for k in (0..mesh.axes.len().saturating_sub(1)).rev() {
        stride[k] = stride[k + 1] * mesh.axes[k + 1].1;
    }
    let sizes: Vec<i64> = perm.iter().map(|&k| mesh.axes[k].1).collect();
    let total: i64 = sizes.iter().product();
    let devices = (0..total)
        .map(|flat| {
            let (mut r, mut d) = (flat, 0);
            for (i, &k) in perm.iter().enumerate().rev() {
                d += (r % sizes[i]) * stride[k];
                r /= sizes[i];
            }
            d
        })
        .collect();
    if rep > 1 {
        tiles.push(rep);
    }
    Ok(OpSharding {
        r#type: op_sharding::Type::Other as i32,
        tile_assignment_dimensions: tiles,
        tile_assignment_devices: devices,
        replicate_on_last_tile_dim: rep > 1,
        ..Default::default()
    })
}

/// The sharding of value `k` of the Shardy attribute `key` of custom call `id`.
fn sdy_sharding(m: &Module, id: InstId, key: &str, k: usize) -> PluginResult<OpSharding> {
    let all = axle::ir::sdy::shardings_of(m, id, key).map_err(|e| refuse(m, id, &e.to_string()))?;
    let (mesh, s) = all
        .get(k)
        .ok_or_else(|| refuse(m, id, &format!("has no {key} for its value {k}")))?;
    op_sharding_of(mesh, s).map_err(|e| refuse(m, id, &e))
}

/// The sharding of entry parameter `p`: its own, else the `xla.sdy.in_shardings` of the
/// `shard_map` it enters (JAX leaves it to the compiler when the jit has no in_shardings),
/// else replicated.
fn param_sharding(m: &Module, p: InstId, users: &[(InstId, usize)]) -> PluginResult<OpSharding> {
    if m.attr(p, &AttrKey::Sharding).is_some() {
        return sharding(m, p).ok_or_else(|| refuse(m, p, "has a sharding axle cannot read"));
    }
    for &(u, k) in users {
        if target(m, u) == Some(GLOBAL_TO_LOCAL) {
            return sdy_sharding(m, u, "xla.sdy.in_shardings", k);
        }
    }
    Ok(replicated())
}

/// The sharding of each array leaf of the entry's root: the root's own, else, leaf by leaf,
/// the `xla.sdy.out_shardings` of the `shard_map` result it is, the sharding of the parameter
/// it is, or replicated.
fn output_shardings(
    m: &Module,
    root: InstId,
    params: &[(InstId, OpSharding)],
) -> PluginResult<Vec<OpSharding>> {
    if m.attr(root, &AttrKey::Sharding).is_some() {
        let s =
            sharding(m, root).ok_or_else(|| refuse(m, root, "has a sharding axle cannot read"))?;
        let mut out = Vec::new();
        sharding_leaves(&s, &mut out);
        return Ok(out);
    }
    // (instruction, tuple index path) of each leaf, depth-first.
    fn walk(
        m: &Module,
        id: InstId,
        path: &mut Vec<usize>,
        params: &[(InstId, OpSharding)],
        out: &mut Vec<OpSharding>,
    ) -> PluginResult<()> {
        // Follow the value to where it was made.
        let mut at = id;
        let mut path_here = path.clone();
        loop {
            match (m.opcode(at), target(m, at)) {
                (Opcode::GetTupleElement, _) => {
                    let k = m.int_attr(at, &AttrKey::Index).unwrap_or(0).max(0) as usize;
                    path_here.insert(0, k);
                    at = m.operands(at)[0];
                }
                (Opcode::Tuple, _) if !path_here.is_empty() => {
                    let k = path_here.remove(0);
                    at = m.operands(at)[k];
                }
                (_, Some(RESULT_SHARDING)) => at = m.operands(at)[0],
                _ => break,
            }
        }
        if let Shape::Tuple(es) = m.shape_of(m.shape_id(at)).clone() {
            if path_here.is_empty() {
                for k in 0..es.len() {
                    path.push(k);
                    walk(m, id, path, params, out)?;
                    path.pop();
                }
                return Ok(());
            }
        }
        let s = if target(m, at) == Some(LOCAL_TO_GLOBAL) {
            let k = path_here.first().copied().unwrap_or(0);
            sdy_sharding(m, at, "xla.sdy.out_shardings", k)?
        } else if let Some((_, s)) = params.iter().find(|(p, _)| *p == at) {
            s.clone()
        } else {
            replicated()
        };
        out.push(s);
        Ok(())
    }
    let mut out = Vec::new();
    walk(m, root, &mut Vec::new(), params, &mut out)?;
    Ok(out)
}

fn is_replicated(s: &OpSharding) -> bool {
    use op_sharding::Type;
    match Type::try_from(s.r#type) {
        Ok(Type::Replicated) | Ok(Type::Manual) | Ok(Type::Maximal) => true,
        Ok(Type::Tuple) => s.tuple_shardings.iter().all(is_replicated),
        Ok(Type::Other) => {
            let data = data_tiles(s);
            data.iter().all(|&t| t == 1)
        }
        _ => false,
    }
}

/// The tile counts of an `Other` sharding's data dimensions (without the replicated or
/// subgroup dimensions at the end).
fn data_tiles(s: &OpSharding) -> &[i64] {
    let t = &s.tile_assignment_dimensions;
    let extra = s.last_tile_dims.len() + usize::from(s.replicate_on_last_tile_dim);
    &t[..t.len().saturating_sub(extra)]
}

/// The shard one device holds of an array of `dims` under sharding `s`.
fn shard_dims(s: &OpSharding, ty: ElementType, dims: &[i64]) -> Result<Vec<i64>, String> {
    use op_sharding::Type;
    match Type::try_from(s.r#type) {
        Ok(Type::Replicated) | Ok(Type::Manual) | Ok(Type::Maximal) => Ok(dims.to_vec()),
        Ok(Type::Other) => {
            let tiles = data_tiles(s);
            if tiles.len() != dims.len() {
                return Err(format!(
                    "a sharding of {} tiled dimensions for {}{dims:?}",
                    tiles.len(),
                    ty.name()
                ));
            }
            dims.iter()
                .zip(tiles)
                .map(|(&d, &t)| {
                    if t >= 1 && d % t == 0 {
                        Ok(d / t)
                    } else {
                        Err(format!(
                            "{}{dims:?} does not split evenly into {tiles:?} tiles",
                            ty.name()
                        ))
                    }
                })
                .collect()
        }
        _ => Err("a sharding of an unsupported kind".into()),
    }
}

/// Whether every axis of the module's meshes with more than one device is among the manual
/// axes of the custom call `id` (a `shard_map` over all of them).
fn all_axes_manual(m: &Module, id: InstId) -> Result<(), String> {
    let fa = match m.attr(id, &AttrKey::FrontendAttributes) {
        Some(AttrValue::Raw(t)) => t.to_string(),
        _ => String::new(),
    };
    let manual = axle::ir::sdy::frontend_value(&fa, "xla.sdy.manual_axes").unwrap_or_default();
    let Some(meshes) = m
        .header_attrs
        .iter()
        .find(|(k, _)| k == "frontend_attributes")
        .and_then(|(_, v)| axle::ir::sdy::frontend_value(v, "xla.sdy.meshes"))
    else {
        return Ok(());
    };
    for mesh in axle::ir::sdy::parse_meshes(&meshes)? {
        for (axis, size) in &mesh.axes {
            if *size > 1 && !manual.contains(&format!("\"{axis}\"")) {
                return Err(format!(
                    "leaves mesh axis \"{axis}\" (of {size} devices) to automatic partitioning"
                ));
            }
        }
    }
    Ok(())
}

fn intern_tuple(m: &mut Module, parts: &[InstId]) -> ShapeId {
    let elems: Vec<ShapeId> = parts.iter().map(|&p| m.shape_id(p)).collect();
    m.intern_shape(Shape::Tuple(elems.into()))
}

/// The leaves of `shape`, depth-first.
fn leaves(m: &Module, s: ShapeId, out: &mut Vec<Shape>) {
    match m.shape_of(s) {
        Shape::Tuple(es) => {
            for &e in es.iter() {
                leaves(m, e, out);
            }
        }
        other => out.push(other.clone()),
    }
}

fn sharding_leaves(s: &OpSharding, out: &mut Vec<OpSharding>) {
    if s.r#type == op_sharding::Type::Tuple as i32 {
        for e in &s.tuple_shardings {
            sharding_leaves(e, out);
        }
    } else {
        out.push(s.clone());
    }
}

/// Module `m` rewritten for one device of `replicas` x `partitions` (see the module docs).
pub fn per_device(mut m: Module, replicas: u32, partitions: u32) -> PluginResult<PerDevice> {
    if u64::from(replicas) * u64::from(partitions) <= 1 {
        return Ok(PerDevice {
            module: m,
            param_shardings: None,
            output_sharding: None,
        });
    }
    let (hr, hp) = (m.replica_count(), m.num_partitions());
    if u64::from(hr) * u64::from(hp) > 1 && (hr, hp) != (replicas, partitions) {
        return Err(PluginError::invalid(format!(
            "axle: the module is for {hr} replicas x {hp} partitions, the compile options ask for \
             {replicas} x {partitions}"
        )));
    }
    m.set_replica_count(replicas);
    m.set_num_partitions(partitions);
    let entry = m.entry();
    let params = m.params(entry).to_vec();
    let mut users: std::collections::HashMap<InstId, Vec<(InstId, usize)>> = Default::default();
    for id in m.comp_insts(entry) {
        for (k, &o) in m.operands(id).iter().enumerate() {
            users.entry(o).or_default().push((id, k));
        }
    }
    let mut by_param = Vec::with_capacity(params.len());
    for &p in &params {
        let s = param_sharding(&m, p, users.get(&p).map_or(&[][..], |u| &u[..]))?;
        by_param.push((p, s));
    }
    let root = m.root(entry);
    let out_leaves = output_shardings(&m, root, &by_param)?;
    let mut global_outputs = Vec::new();
    leaves(&m, m.shape_id(root), &mut global_outputs);
    let output_sharding = Some(if matches!(m.shape(root), Shape::Tuple(_)) {
        OpSharding {
            r#type: op_sharding::Type::Tuple as i32,
            tuple_shardings: out_leaves.clone(),
            ..Default::default()
        }
    } else {
        out_leaves.first().cloned().unwrap_or_else(replicated)
    });
    let param_shardings = Some(by_param.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>());

    // What the root, the parameters and the instructions with an effect depend on is what
    // runs; the rest (dead code, which may work on global values) goes.
    let all = m.comp_insts(entry);
    let mut live: HashSet<InstId> = HashSet::new();
    let mut stack: Vec<InstId> = all
        .iter()
        .copied()
        .filter(|&id| {
            id == root
                || m.opcode(id) == Opcode::Parameter
                || axle::ir::passes::has_own_effect(&m, id)
        })
        .collect();
    while let Some(id) = stack.pop() {
        if live.insert(id) {
            stack.extend(m.operands(id).iter().copied());
            stack.extend(m.control_predecessors(id).iter().copied());
        }
    }
    for &id in all.iter().rev() {
        if !live.contains(&id) {
            m.remove_inst(id);
        }
    }
    let order = axle::ir::traversal::topo_order(&m, &m.comp_insts(entry));
    // Instructions whose shape became the per-device one.
    let mut changed = HashSet::new();
    let mut gone = Vec::new();
    for id in order {
        if !m.is_live(id) {
            continue;
        }
        let op = m.opcode(id);
        if op == Opcode::Parameter {
            let Shape::Array(a) = m.shape(id).clone() else {
                continue;
            };
            let Some((_, s)) = by_param.iter().find(|(p, _)| *p == id) else {
                continue;
            };
            let local = shard_dims(s, a.ty, &a.dims).map_err(|e| refuse(&m, id, &e))?;
            if local[..] != a.dims[..] {
                let mut a2 = a.clone();
                a2.dims = local.into();
                let sid = m.intern_shape(Shape::Array(a2));
                let layout = m.layout_id(id);
                m.set_shape(id, sid, layout);
                changed.insert(id);
            }
            continue;
        }
        let ops = m.operands(id).to_vec();
        let touches = ops.iter().any(|o| changed.contains(o));
        match target(&m, id) {
            Some(GLOBAL_TO_LOCAL) => {
                all_axes_manual(&m, id).map_err(|e| refuse(&m, id, &e))?;
                let want = m.shape_id(id);
                let got = if ops.len() == 1 && !matches!(m.shape_of(want), Shape::Tuple(_)) {
                    m.shape_id(ops[0])
                } else {
                    intern_tuple(&mut m, &ops)
                };
                if got != want {
                    return Err(PluginError::invalid(format!(
                        "axle: %{} ({GLOBAL_TO_LOCAL}) gives each device {}, but its arguments' \
                         shardings give it {}",
                        m.name(id),
                        shape_text(&m, want),
                        shape_text(&m, got)
                    )));
                }
                gone.push((id, ops));
                continue;
            }
            Some(LOCAL_TO_GLOBAL) => {
                all_axes_manual(&m, id).map_err(|e| refuse(&m, id, &e))?;
                gone.push((id, ops));
                changed.insert(id);
                continue;
            }
            Some(RESULT_SHARDING) if ops.len() == 1 => {
                if changed.contains(&ops[0]) {
                    changed.insert(id);
                }
                gone.push((id, ops));
                continue;
            }
            _ => {}
        }
        if id != root {
            if let Some(s) = sharding(&m, id) {
                if !is_replicated(&s) {
                    return Err(refuse(&m, id, "has a sharding of its own"));
                }
            } else if m.attr(id, &AttrKey::Sharding).is_some() {
                return Err(refuse(&m, id, "has a sharding axle cannot read"));
            }
        }
        if !touches {
            continue;
        }
        match op {
            Opcode::GetTupleElement | Opcode::Tuple => {
                // Shapes are set when the replacements are made (below).
                changed.insert(id);
            }
            _ => {
                let o = ops
                    .iter()
                    .find(|o| changed.contains(*o))
                    .copied()
                    .unwrap_or(id);
                return Err(refuse(
                    &m,
                    id,
                    &format!("works on %{}, a global value of sharded data", m.name(o)),
                ));
            }
        }
    }

    // Replace each custom call by its operand (or a tuple of its operands), in program order,
    // then give tuples and get-tuple-elements the shapes of what they now read.
    let plans: Vec<(InstId, Vec<InstId>, bool, String)> = gone
        .into_iter()
        .map(|(id, ops)| {
            let single = ops.len() == 1
                && (target(&m, id) == Some(RESULT_SHARDING)
                    || !matches!(m.shape(id), Shape::Tuple(_)));
            let name = format!("{}.local", m.name(id));
            (id, ops, single, name)
        })
        .collect();
    let tuple_shape = m.intern_shape(Shape::Tuple(Box::new([])));
    let layout = m.no_layout();
    let mut rw = m.rewriter();
    for (id, ops, single, name) in plans {
        // Operands that were themselves replaced are forwarded when the rewriter finishes.
        let new = if single {
            ops[0]
        } else {
            rw.add(
                entry,
                NewInst {
                    opcode: Opcode::Tuple,
                    shape: tuple_shape,
                    layout,
                    operands: ops,
                    attrs: Vec::new(),
                    name: Some(name),
                },
            )
        };
        rw.replace_all_uses(id, new);
    }
    rw.finish();
    let order = axle::ir::traversal::topo_order(&m, &m.comp_insts(entry));
    for id in order {
        let ops = m.operands(id).to_vec();
        let shape = match m.opcode(id) {
            Opcode::Tuple => intern_tuple(&mut m, &ops),
            Opcode::GetTupleElement => {
                let k = m.int_attr(id, &AttrKey::Index).unwrap_or(-1);
                match m.shape(ops[0]) {
                    Shape::Tuple(es) if k >= 0 && (k as usize) < es.len() => es[k as usize],
                    _ => continue,
                }
            }
            _ => continue,
        };
        let layout = m.layout_id(id);
        m.set_shape(id, shape, layout);
    }
    m.entry_layout = None;

    // Each result must be the device's shard of the global result its sharding describes.
    let mut local_outputs = Vec::new();
    let root = m.root(entry);
    leaves(&m, m.shape_id(root), &mut local_outputs);
    for (k, ((g, l), s)) in global_outputs
        .iter()
        .zip(&local_outputs)
        .zip(&out_leaves)
        .enumerate()
    {
        let (Shape::Array(g), Shape::Array(l)) = (g, l) else {
            continue;
        };
        let want = shard_dims(s, g.ty, &g.dims).map_err(|e| refuse(&m, root, &e))?;
        if want[..] != l.dims[..] {
            return Err(refuse(
                &m,
                root,
                &format!(
                    "result {k}: each device computes {}{:?}, but the result's sharding \
                     asks for shards of {:?} of {}{:?}",
                    l.ty.name(),
                    l.dims,
                    want,
                    g.ty.name(),
                    g.dims
                ),
            ));
        }
    }
    axle::verify_module(&m).map_err(|e| {
        PluginError::internal(format!("axle: the per-device module does not verify: {e}"))
    })?;
    Ok(PerDevice {
        module: m,
        param_shardings,
        output_sharding,
    })
}

fn shape_text(m: &Module, s: ShapeId) -> String {
    let mut out = Vec::new();
    leaves(m, s, &mut out);
    out.iter()
        .map(|l| match l {
            Shape::Array(a) => format!("{}{:?}", a.ty.name(), a.dims),
            other => format!("{other:?}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(text: &str) -> Module {
        let m = axle::ir::parse_module(text).unwrap();
        axle::verify_module(&m).unwrap();
        m
    }

    fn dims(m: &Module, id: InstId) -> Vec<i64> {
        m.array_shape(id).unwrap().dims.to_vec()
    }

    #[test]
    fn a_shard_map_module_becomes_the_per_device_program() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../testkit/collectives/pmap_psum_4.hlo"
        );
        let m = module(&std::fs::read_to_string(path).unwrap());
        let pd = per_device(m, 1, 4).unwrap();
        let m = &pd.module;
        assert_eq!((m.replica_count(), m.num_partitions()), (1, 4));
        let p = m.params(m.entry())[0];
        assert_eq!(dims(m, p), vec![1, 3, 4]);
        let root = m.root(m.entry());
        let outs: Vec<Vec<i64>> = m.operands(root).iter().map(|&o| dims(m, o)).collect();
        assert_eq!(outs, vec![vec![1, 3, 4], vec![1, 4, 3, 4]]);
        let live = m.comp_insts(m.entry());
        assert!(live.iter().all(|&i| target(m, i).is_none()));
        assert_eq!(pd.param_shardings.unwrap().len(), 1);
        let out = pd.output_sharding.unwrap();
        assert_eq!(out.tuple_shardings.len(), 2);
        assert_eq!(
            out.tuple_shardings[1].tile_assignment_dimensions,
            vec![4, 1, 1, 1]
        );
    }

    #[test]
    fn automatic_partitioning_is_refused_by_name() {
        let m = module(
            "HloModule m\n\nENTRY e {\n  p = f32[8,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}\n  \
             ROOT s = f32[8,4]{1,0} sine(p), sharding={devices=[4,1]<=[4]}\n}\n",
        );
        let e = per_device(m.clone(), 1, 4).unwrap_err();
        assert!(
            e.message.contains("%s (sine)") && e.message.contains("automatic SPMD partitioning"),
            "{}",
            e.message
        );
        // Uneven shards are refused too; one device runs the module as it is.
        let uneven = module(
            "HloModule m\n\nENTRY e {\n  p = f32[6,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}\n  \
             ROOT s = f32[6,4]{1,0} sine(p)\n}\n",
        );
        let e = per_device(uneven, 1, 4).unwrap_err();
        assert!(e.message.contains("does not split evenly"), "{}", e.message);
        let one = per_device(m, 1, 1).unwrap();
        assert!(one.param_shardings.is_none());
        assert_eq!(
            dims(&one.module, one.module.params(one.module.entry())[0]),
            vec![8, 4]
        );
    }

    #[test]
    fn replicated_programs_run_whole_on_every_device() {
        let m = module(
            "HloModule m\n\nENTRY e {\n  p = f32[8]{0} parameter(0), sharding={replicated}\n  \
             ROOT s = f32[8]{0} sine(p), sharding={replicated}\n}\n",
        );
        let pd = per_device(m, 1, 4).unwrap();
        assert_eq!(dims(&pd.module, pd.module.root(pd.module.entry())), vec![8]);
    }

    #[test]
    fn every_corpus_module_takes_and_gives_xla_s_per_device_shapes() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testkit/collectives");
        let mut seen = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            let file = path.file_name().unwrap().to_str().unwrap().to_string();
            let Some(name) = file.strip_suffix(".hlo").filter(|n| !n.ends_with(".opt")) else {
                continue;
            };
            let devices = (0..)
                .take_while(|d| dir.join(format!("{name}.d{d}.in0.npy")).exists())
                .count() as u32;
            let m = module(&std::fs::read_to_string(&path).unwrap());
            let pd = per_device(m, 1, devices).unwrap_or_else(|e| panic!("{name}: {e:?}"));
            let m = &pd.module;
            for (k, &p) in m.params(m.entry()).iter().enumerate() {
                let npy = axle::ir::read_npy(dir.join(format!("{name}.d0.in{k}.npy"))).unwrap();
                assert_eq!(dims(m, p), npy.shape.dims.to_vec(), "{name} parameter {k}");
            }
            let mut outs = Vec::new();
            leaves(m, m.shape_id(m.root(m.entry())), &mut outs);
            for (k, o) in outs.iter().enumerate() {
                let npy = axle::ir::read_npy(dir.join(format!("{name}.d0.out{k}.npy"))).unwrap();
                let Shape::Array(a) = o else {
                    panic!("{name}: output {k} is not an array")
                };
                assert_eq!(
                    a.dims.to_vec(),
                    npy.shape.dims.to_vec(),
                    "{name} output {k}"
                );
            }
            seen += 1;
        }
        assert_eq!(seen, 12);
    }
}
