//! Collectives on one device of a multi-device run: `replica-id`, `partition-id`,
//! `all-reduce`, `all-gather`, `reduce-scatter`, `all-to-all` (array and tuple forms),
//! `collective-permute`, `collective-broadcast`, their `-start`/`-done` pairs and
//! `async-start`/`-update`/`-done` around any of them.
//!
//! Each device of a run evaluates the same module on its own thread with its own
//! [`Device`]; a collective turns its replica groups (or source-target pairs) into the devices
//! it meets, in group order, as XLA's `GetParticipatingDevices` does
//! ([`axle_ir::collective::DeviceMesh::participants`]), and exchanges bytes through the
//! [`Communicator`]. Reductions fold the members' values left to right in group order with the
//! instruction's reducer, element by element, so every device (and every transport) computes
//! the same bits (a one-op reducer such as `add` runs as that elementwise op over the whole
//! buffer, any other reducer as its scalar program per element). `collective-permute` gives zeros to a device no pair sends to; a
//! `collective-broadcast` sends member 0's value to its group.
//!
//! Without a [`Device`] (plain [`crate::evaluate`]) collectives are an error naming the
//! instruction, and `replica-id`/`partition-id` are 0.

use super::elementwise;
use super::scalar::Fast;
use super::shape_ops as so;
use super::{arr, Evaluator, Fail, R};
use axle_comm::{Communicator, Op, OpKind};
use axle_ir::collective::{DeviceMesh, GroupMode, SourceTargetPair};
use axle_ir::{ArrayLiteral, AttrKey, AttrValue, InstId, Literal, Opcode, OwnedShape};

/// One device of a multi-device run: its endpoint and the run's replicas x partitions.
#[derive(Clone, Copy)]
pub struct Device<'a> {
    /// This device's endpoint; its [`Communicator::device`] is the device id.
    pub comm: &'a dyn Communicator,
    /// The run's devices.
    pub mesh: DeviceMesh,
}

fn comm_err(e: axle_comm::CommError) -> Fail {
    Fail::Msg(e.to_string())
}

/// Row-major `(outer, inner bytes)` around dimension `d` of an array of `dims` and element
/// width `w`: the array is `outer` blocks of `dims[d] * inner` bytes.
fn around(dims: &[i64], d: usize, w: usize) -> (usize, usize) {
    let outer: i64 = dims[..d].iter().product();
    let inner: i64 = dims[d + 1..].iter().product();
    (outer as usize, inner as usize * w)
}

/// Splits `a` into `k` equal chunks along dimension `d`.
fn split(a: &ArrayLiteral, d: usize, k: usize) -> R<Vec<Vec<u8>>> {
    let dims = &a.shape.dims;
    let n = dims[d] as usize;
    if k == 0 || !n.is_multiple_of(k) {
        return Err(format!("dimension {d} of size {n} does not split into {k} chunks").into());
    }
    let (outer, inner) = around(dims, d, a.ty().byte_size());
    let c = n / k * inner;
    let mut out = vec![Vec::with_capacity(outer * c); k];
    for o in 0..outer {
        let block = &a.data[o * n * inner..(o + 1) * n * inner];
        for (j, chunk) in out.iter_mut().enumerate() {
            chunk.extend_from_slice(&block[j * c..(j + 1) * c]);
        }
    }
    Ok(out)
}

/// Concatenates equal chunks (each of `dims` with `dims[d] / parts.len()` along `d`) along
/// dimension `d` into an array of `dims`.
fn join(parts: &[Vec<u8>], dims: &[i64], d: usize, w: usize) -> R<Vec<u8>> {
    let (outer, inner) = around(dims, d, w);
    let total = outer * dims[d] as usize * inner;
    if parts.iter().map(Vec::len).sum::<usize>() != total {
        return Err("the gathered pieces do not fill the result".into());
    }
    let mut out = Vec::with_capacity(total);
    if outer == 0 {
        // An empty result (a zero dimension before `d`).
        return Ok(out);
    }
    for o in 0..outer {
        for p in parts {
            let c = p.len() / outer;
            out.extend_from_slice(&p[o * c..(o + 1) * c]);
        }
    }
    Ok(out)
}

/// A zero value of `shape` (tokens as empty tuples).
fn zeros(s: &OwnedShape) -> Literal {
    match s {
        OwnedShape::Array(a) => Literal::Array(so::array(
            a.ty,
            &a.dims,
            vec![0u8; so::numel(&a.dims) * a.ty.byte_size()],
        )),
        OwnedShape::Tuple(t) => Literal::Tuple(t.iter().map(zeros).collect()),
        _ => Literal::Tuple(Vec::new()),
    }
}

impl<'m> Evaluator<'m> {
    fn device(&self, op: Opcode) -> R<Device<'m>> {
        self.device.ok_or_else(|| {
            Fail::Msg(format!(
                "{} needs a multi-device run (evaluate it with evaluate_devices, or \
                 `axle run --devices N`)",
                op.name()
            ))
        })
    }

    /// The devices `id` meets, in group order.
    fn participants(&self, id: InstId, dev: Device<'_>) -> R<Vec<u32>> {
        let m = self.m;
        let op = m.opcode(id);
        let flag = matches!(
            op,
            Opcode::AllReduce
                | Opcode::AllReduceStart
                | Opcode::AllGather
                | Opcode::AllGatherStart
                | Opcode::ReduceScatter
        );
        let global =
            flag.then(|| m.attr(id, &AttrKey::UseGlobalDeviceIds) == Some(&AttrValue::Bool(true)));
        let mode = GroupMode::of(m.attr(id, &AttrKey::ChannelId).is_some(), global)?;
        let groups = match m.attr(id, &AttrKey::ReplicaGroups) {
            Some(AttrValue::ReplicaGroups(g)) => g.expand()?,
            None => Vec::new(),
            Some(_) => return Err("replica_groups is not a list of groups".into()),
        };
        Ok(dev.mesh.participants(dev.comm.device(), &groups, mode)?)
    }

    /// Folds the members' buffers of one array operand with `id`'s reducer, in group order.
    fn all_reduce_array(
        &mut self,
        id: InstId,
        dev: Device<'_>,
        group: &[u32],
        a: &ArrayLiteral,
    ) -> R<Vec<u8>> {
        let comp = self.comp(id, AttrKey::ToApply)?;
        let mut c = self.callable(comp)?;
        let w = a.ty().byte_size();
        let name = self.m.name(id).to_string();
        let mut failure: Option<Fail> = None;
        let mut out = vec![[0u8; 16]; 1];
        // A one-op reducer (`add`, `maximum`, ...) of the operand's type runs as one typed
        // elementwise op per member, with the semantics of the op itself.
        let (ty, ftz) = (a.ty(), self.ftz);
        let fast = match c.fast() {
            Fast::Binary(op) if c.in_tys.iter().all(|&t| t == ty) => Some(op),
            _ => None,
        };
        let mut reduce = |acc: &mut [u8], x: &[u8]| -> Result<(), String> {
            if acc.len() != x.len() {
                return Err("members' buffers differ in size".into());
            }
            if let Some(op) = fast {
                let mut r = vec![0u8; acc.len()];
                elementwise::binary(op, ty, acc, x, &mut r, ftz)?;
                acc.copy_from_slice(&r);
                return Ok(());
            }
            for (ac, xc) in acc.chunks_exact_mut(w).zip(x.chunks_exact(w)) {
                if let Err(f) = self.call(&mut c, &[&*ac, xc], &mut out) {
                    failure = Some(f);
                    return Err("the reducer failed".into());
                }
                ac.copy_from_slice(&out[0][..w]);
            }
            Ok(())
        };
        let op = Op {
            kind: OpKind::AllReduce,
            label: &name,
        };
        let r = dev.comm.all_reduce(op, group, &a.data, &mut reduce);
        if let Some(f) = failure {
            return Err(f);
        }
        r.map_err(comm_err)
    }

    /// The array operands of a collective (all of them must be arrays).
    fn arrays<'o>(ops: &[&'o Literal]) -> R<Vec<&'o ArrayLiteral>> {
        ops.iter().map(|l| arr(l)).collect()
    }

    /// `id`'s value, one literal per operand, as one array or a tuple as declared.
    fn pack(&self, id: InstId, vals: Vec<Literal>) -> Literal {
        if matches!(self.m.shape(id), axle_ir::Shape::Tuple(_)) || vals.len() != 1 {
            Literal::Tuple(vals)
        } else {
            vals.into_iter().next().expect("one value")
        }
    }

    fn declared(&self, id: InstId) -> R<OwnedShape> {
        OwnedShape::from_id(self.m, self.m.shape_id(id))
            .ok_or_else(|| Fail::Msg("the declared shape is not valid".into()))
    }

    /// `all-reduce`: each operand reduced over the group.
    fn all_reduce(&mut self, id: InstId, ops: &[&Literal]) -> R<Vec<Literal>> {
        let dev = self.device(Opcode::AllReduce)?;
        let group = self.participants(id, dev)?;
        let mut vals = Vec::new();
        for a in Self::arrays(ops)? {
            let data = self.all_reduce_array(id, dev, &group, a)?;
            vals.push(Literal::Array(so::array(a.ty(), &a.shape.dims, data)));
        }
        Ok(vals)
    }

    fn split_dim(&self, id: InstId) -> R<usize> {
        let d = self.ints(id, AttrKey::Dimensions)?;
        match d {
            [d] if *d >= 0 => Ok(*d as usize),
            _ => Err("dimensions must name one dimension".into()),
        }
    }

    /// Result shape `k` of `id` (its only array, or element `k` of its tuple).
    fn result_dims(&self, id: InstId, k: usize, tuple_at: Option<usize>) -> R<Vec<i64>> {
        let s = self.declared(id)?;
        let s = match tuple_at {
            Some(t) => s
                .as_tuple()
                .and_then(|v| v.get(t))
                .cloned()
                .ok_or("the result is not a tuple of the expected form")?,
            None => s,
        };
        let a = match &s {
            OwnedShape::Array(a) => a.clone(),
            OwnedShape::Tuple(v) => v
                .get(k)
                .and_then(|x| x.as_array())
                .cloned()
                .ok_or("the result is not a tuple of arrays")?,
            _ => return Err("the result is not an array".into()),
        };
        Ok(a.dims.to_vec())
    }

    /// `all-gather`: each operand's members' values concatenated along the dimension.
    fn all_gather(
        &mut self,
        id: InstId,
        ops: &[&Literal],
        tuple_at: Option<usize>,
    ) -> R<Vec<Literal>> {
        let dev = self.device(Opcode::AllGather)?;
        let group = self.participants(id, dev)?;
        let d = self.split_dim(id)?;
        let name = self.m.name(id).to_string();
        let mut vals = Vec::new();
        for (k, a) in Self::arrays(ops)?.into_iter().enumerate() {
            if d >= a.shape.rank() {
                return Err(format!("dimension {d} is out of range").into());
            }
            let op = Op {
                kind: OpKind::AllGather,
                label: &name,
            };
            let parts = dev.comm.all_gather(op, &group, &a.data).map_err(comm_err)?;
            let mut dims = a.shape.dims.to_vec();
            dims[d] *= group.len() as i64;
            let want = self.result_dims(id, k, tuple_at)?;
            if want != dims {
                return Err(format!(
                    "gathering {} devices gives dimensions {dims:?}, but the result has {want:?}",
                    group.len()
                )
                .into());
            }
            let data = join(&parts, &dims, d, a.ty().byte_size())?;
            vals.push(Literal::Array(so::array(a.ty(), &dims, data)));
        }
        Ok(vals)
    }

    /// `reduce-scatter`: the reduction of each operand, this member's chunk along the
    /// dimension.
    fn reduce_scatter(&mut self, id: InstId, ops: &[&Literal]) -> R<Vec<Literal>> {
        let dev = self.device(Opcode::ReduceScatter)?;
        let group = self.participants(id, dev)?;
        let d = self.split_dim(id)?;
        let rank = group
            .iter()
            .position(|&x| x == dev.comm.device())
            .ok_or("this device is not in its group")?;
        let mut vals = Vec::new();
        for a in Self::arrays(ops)? {
            if d >= a.shape.rank() {
                return Err(format!("dimension {d} is out of range").into());
            }
            let data = self.all_reduce_array(id, dev, &group, a)?;
            let full = so::array(a.ty(), &a.shape.dims, data);
            let mut chunks = split(&full, d, group.len())?;
            let mut dims = a.shape.dims.to_vec();
            dims[d] /= group.len() as i64;
            vals.push(Literal::Array(so::array(
                a.ty(),
                &dims,
                std::mem::take(&mut chunks[rank]),
            )));
        }
        Ok(vals)
    }

    /// `all-to-all`: with `dimensions={d}`, each operand split along `d` into one chunk per
    /// member and the received chunks concatenated in group order; without, operand `k` goes
    /// to member `k` and result `k` comes from it.
    fn all_to_all(&mut self, id: InstId, ops: &[&Literal]) -> R<Vec<Literal>> {
        let dev = self.device(Opcode::AllToAll)?;
        let group = self.participants(id, dev)?;
        let name = self.m.name(id).to_string();
        let op = Op {
            kind: OpKind::AllToAll,
            label: &name,
        };
        let arrays = Self::arrays(ops)?;
        if self.m.attr(id, &AttrKey::Dimensions).is_some() {
            let d = self.split_dim(id)?;
            let mut vals = Vec::new();
            for a in arrays {
                if d >= a.shape.rank() {
                    return Err(format!("dimension {d} is out of range").into());
                }
                let chunks = split(a, d, group.len())?;
                let refs: Vec<&[u8]> = chunks.iter().map(|c| &c[..]).collect();
                let got = dev.comm.all_to_all(op, &group, &refs).map_err(comm_err)?;
                let data = join(&got, &a.shape.dims, d, a.ty().byte_size())?;
                vals.push(Literal::Array(so::array(a.ty(), &a.shape.dims, data)));
            }
            return Ok(vals);
        }
        if arrays.len() != group.len() {
            return Err(format!(
                "the tuple form needs one operand per group member ({}), got {}",
                group.len(),
                arrays.len()
            )
            .into());
        }
        let refs: Vec<&[u8]> = arrays.iter().map(|a| &a.data[..]).collect();
        let got = dev.comm.all_to_all(op, &group, &refs).map_err(comm_err)?;
        Ok(arrays
            .iter()
            .zip(got)
            .map(|(a, data)| Literal::Array(so::array(a.ty(), &a.shape.dims, data)))
            .collect())
    }

    /// `collective-permute`: the value of the device whose pair targets this one, else zeros.
    fn permute(&mut self, id: InstId, ops: &[&Literal]) -> R<Literal> {
        let dev = self.device(Opcode::CollectivePermute)?;
        let m = self.m;
        if ops.len() != 1 {
            return Err(
                "the in-place form of collective-permute (4 operands) is not supported".into(),
            );
        }
        let a = arr(ops[0])?;
        let pairs: &[SourceTargetPair] = match m.attr(id, &AttrKey::SourceTargetPairs) {
            Some(AttrValue::Pairs(p)) => p,
            _ => return Err("missing source_target_pairs".into()),
        };
        let mode = GroupMode::of(m.attr(id, &AttrKey::ChannelId).is_some(), None)?;
        let (to, from) = dev.mesh.permute_peers(dev.comm.device(), pairs, mode)?;
        let name = m.name(id).to_string();
        let op = Op {
            kind: OpKind::Permute,
            label: &name,
        };
        let got = dev.comm.permute(op, &to, from, &a.data).map_err(comm_err)?;
        let data = match got {
            Some(d) if d.len() == a.data.len() => d,
            Some(_) => return Err("the received buffer has the wrong size".into()),
            None => vec![0u8; a.data.len()],
        };
        Ok(Literal::Array(so::array(a.ty(), &a.shape.dims, data)))
    }

    /// `collective-broadcast`: member 0's value of each operand.
    fn broadcast(&mut self, id: InstId, ops: &[&Literal]) -> R<Vec<Literal>> {
        let dev = self.device(Opcode::CollectiveBroadcast)?;
        let group = self.participants(id, dev)?;
        let name = self.m.name(id).to_string();
        let mut vals = Vec::new();
        for a in Self::arrays(ops)? {
            let op = Op {
                kind: OpKind::Broadcast,
                label: &name,
            };
            let data = dev
                .comm
                .broadcast(op, &group, 0, &a.data)
                .map_err(comm_err)?;
            vals.push(Literal::Array(so::array(a.ty(), &a.shape.dims, data)));
        }
        Ok(vals)
    }

    /// A `-start`'s value: `(operands, results, context...)` as declared (one operand or
    /// result unwrapped), the context as zeros.
    fn start_value(&self, id: InstId, ops: &[&Literal], results: Vec<Literal>) -> R<Literal> {
        let s = self.declared(id)?;
        let t = s.as_tuple().ok_or("a -start must return a tuple")?;
        let wrap = |mut v: Vec<Literal>| {
            if v.len() == 1 {
                v.pop().expect("one")
            } else {
                Literal::Tuple(v)
            }
        };
        let mut out = vec![
            wrap(ops.iter().map(|&l| l.clone()).collect()),
            wrap(results),
        ];
        out.extend(t.iter().skip(2).map(zeros));
        Ok(Literal::Tuple(out))
    }

    /// Evaluates a collective (or `replica-id`/`partition-id`); `None` for other ops.
    pub(crate) fn eval_collective(&mut self, id: InstId, ops: &[&Literal]) -> R<Option<Literal>> {
        use Opcode::*;
        let op = self.m.opcode(id);
        Ok(Some(match op {
            ReplicaId | PartitionId => {
                let v = match self.device {
                    None => 0,
                    Some(d) if op == ReplicaId => d.mesh.replica_of(d.comm.device()),
                    Some(d) => d.mesh.partition_of(d.comm.device()),
                };
                Literal::Array(so::array(
                    axle_ir::ElementType::U32,
                    &[],
                    v.to_le_bytes().to_vec(),
                ))
            }
            AllReduce => {
                let v = self.all_reduce(id, ops)?;
                self.pack(id, v)
            }
            AllReduceStart => {
                // Its result is the reduction itself; `-done` passes it on.
                let v = self.all_reduce(id, ops)?;
                self.pack(id, v)
            }
            AllGather => {
                let v = self.all_gather(id, ops, None)?;
                self.pack(id, v)
            }
            AllGatherStart => {
                let v = self.all_gather(id, ops, Some(1))?;
                self.start_value(id, ops, v)?
            }
            ReduceScatter => {
                let v = self.reduce_scatter(id, ops)?;
                self.pack(id, v)
            }
            AllToAll => {
                let v = self.all_to_all(id, ops)?;
                self.pack(id, v)
            }
            CollectivePermute => self.permute(id, ops)?,
            CollectivePermuteStart => {
                let v = self.permute(id, ops)?;
                self.start_value(id, ops, vec![v])?
            }
            CollectiveBroadcast => {
                let v = self.broadcast(id, ops)?;
                self.pack(id, v)
            }
            AllReduceDone => ops.first().map(|&l| l.clone()).ok_or("missing operand")?,
            AllGatherDone | CollectivePermuteDone | AsyncDone => match ops.first() {
                Some(Literal::Tuple(v)) if v.len() >= 2 => v[1].clone(),
                _ => return Err("the operand is not a -start's tuple".into()),
            },
            AsyncUpdate => ops.first().map(|&l| l.clone()).ok_or("missing operand")?,
            AsyncStart => {
                let c = self.comp(id, AttrKey::Calls)?;
                let args = ops.iter().map(|&l| super::Val::Ref(l)).collect();
                let r = self.run(c, args)?.into_owned();
                let s = self.declared(id)?;
                let t = s.as_tuple().ok_or("async-start must return a tuple")?;
                let mut out = vec![Literal::Tuple(ops.iter().map(|&l| l.clone()).collect()), r];
                out.extend(t.iter().skip(2).map(zeros));
                Literal::Tuple(out)
            }
            RaggedAllToAll => return Err("ragged-all-to-all is not supported".into()),
            _ => return Ok(None),
        }))
    }
}
