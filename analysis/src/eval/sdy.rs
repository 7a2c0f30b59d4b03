//! JAX's `shard_map` entry on a multi-device run: the custom calls
//! `xla.sdy.GlobalToLocalShape` (each device keeps its block of every global operand, per the
//! call's `xla.sdy.in_shardings`) and `xla.sdy.LocalToGlobalShape` (the devices' blocks are
//! gathered and every device assembles the global values, per `xla.sdy.out_shardings`), on the
//! mesh the module's `xla.sdy.meshes` attribute names. Device `d`'s place in the mesh is its
//! partition id. Axes a value is not split over are replicated: the devices along them hold
//! the same block, and assembly takes the last in device order.

use super::shape_ops as so;
use super::{arr, Evaluator, Fail, R};
use axle_comm::{Op, OpKind};
use axle_ir::sdy::{block_rows, shardings_of, Mesh};
use axle_ir::{InstId, Literal, OwnedShape};

impl Evaluator<'_> {
    fn sdy_device(&self, mesh: &Mesh) -> R<i64> {
        let dev = self
            .device
            .ok_or("the shard_map custom calls need a multi-device run")?;
        if mesh.devices() != dev.mesh.partitions as i64 {
            return Err(format!(
                "mesh {} has {} devices but the run has {} partitions",
                mesh.name,
                mesh.devices(),
                dev.mesh.partitions
            )
            .into());
        }
        Ok(dev.mesh.partition_of(dev.comm.device()) as i64)
    }

    fn pack_like(&self, id: InstId, mut vals: Vec<Literal>) -> R<Literal> {
        if matches!(self.m.shape(id), axle_ir::Shape::Tuple(_)) {
            Ok(Literal::Tuple(vals))
        } else if vals.len() == 1 {
            Ok(vals.pop().expect("one value"))
        } else {
            Err(format!("an array result for {} operands", vals.len()).into())
        }
    }

    /// `xla.sdy.GlobalToLocalShape`: this device's block of each operand.
    pub(crate) fn global_to_local(&mut self, id: InstId, ops: &[&Literal]) -> R<Literal> {
        let sh = shardings_of(self.m, id, "xla.sdy.in_shardings")?;
        if sh.len() != ops.len() {
            return Err(format!("{} shardings for {} operands", sh.len(), ops.len()).into());
        }
        let mut vals = Vec::new();
        for ((mesh, s), &op) in sh.iter().zip(ops) {
            let a = arr(op)?;
            let d = self.sdy_device(mesh)?;
            let block = mesh.block(s, &a.shape.dims, d)?;
            let bounds: Vec<[i64; 3]> = block.iter().map(|&(st, n)| [st, st + n, 1]).collect();
            vals.push(Literal::Array(so::slice(a, &bounds)));
        }
        self.pack_like(id, vals)
    }

    /// `xla.sdy.LocalToGlobalShape`: every device's blocks gathered and assembled into the
    /// declared global shapes.
    pub(crate) fn local_to_global(&mut self, id: InstId, ops: &[&Literal]) -> R<Literal> {
        let sh = shardings_of(self.m, id, "xla.sdy.out_shardings")?;
        if sh.len() != ops.len() {
            return Err(format!("{} shardings for {} operands", sh.len(), ops.len()).into());
        }
        let declared = OwnedShape::from_id(self.m, self.m.shape_id(id)).ok_or("bad shape")?;
        let outs: Vec<OwnedShape> = match declared {
            OwnedShape::Tuple(t) => t,
            s => vec![s],
        };
        let dev = self
            .device
            .ok_or("the shard_map custom calls need a multi-device run")?;
        let me = dev.comm.device();
        let r = dev.mesh.replica_of(me);
        let group: Vec<u32> = (0..dev.mesh.partitions)
            .map(|p| dev.mesh.device(r, p))
            .collect();
        let name = self.m.name(id).to_string();
        let mut vals = Vec::new();
        for (((mesh, s), &op), out) in sh.iter().zip(ops).zip(&outs) {
            let a = arr(op)?;
            self.sdy_device(mesh)?;
            let g = out.as_array().ok_or("a global value is not an array")?;
            let w = a.ty().byte_size();
            let op = Op {
                kind: OpKind::AllGather,
                label: &name,
            };
            let parts = dev
                .comm
                .all_gather(op, &group, &a.data)
                .map_err(|e| Fail::Msg(e.to_string()))?;
            let mut data = vec![0u8; so::numel(&g.dims) * w];
            for (j, part) in parts.iter().enumerate() {
                let block = mesh.block(s, &g.dims, j as i64)?;
                let ldims: Vec<i64> = block.iter().map(|b| b.1).collect();
                if ldims != a.shape.dims.to_vec() || part.len() != a.data.len() {
                    return Err(format!(
                        "device {j}'s block {ldims:?} does not match the local value {:?}",
                        a.shape.dims
                    )
                    .into());
                }
                let start: Vec<i64> = block.iter().map(|b| b.0).collect();
                block_rows(&g.dims, &ldims, &start, w, |at, from, n| {
                    data[at..at + n].copy_from_slice(&part[from..from + n])
                });
            }
            vals.push(Literal::Array(so::array(a.ty(), &g.dims, data)));
        }
        self.pack_like(id, vals)
    }
}
