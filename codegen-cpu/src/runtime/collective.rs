//! Collectives at run time: what a collective host call does ([`Coll`], encoded in its
//! descriptor), the device the calling thread runs as ([`run_as`]) and the entry points
//! generated code calls (`axle_rt_collective`, `axle_rt_failed`).
//!
//! Invariants:
//! - A thread runs as at most one device at a time: [`run_as`] puts the device's endpoint and
//!   mesh in a thread-local slot for the length of one run of the entry point (the entry runs
//!   host calls on the calling thread), and takes it out again, also when the run unwinds.
//! - Groups, pairs and blocks are resolved per call from the descriptor and the device's
//!   mesh ([`DeviceMesh::participants`], [`DeviceMesh::permute_peers`]), as the evaluator
//!   resolves them, so one compiled program runs as any device of any run.
//! - Reductions run the reducer's one op (checked at compile time) with the evaluator's typed
//!   elementwise code ([`axle_analysis::eval::binary_elementwise`]) over whole buffers,
//!   folded in group order by the communicator: the bits are the evaluator's, on every device
//!   and over any transport.
//! - A collective that fails records the first error in the slot, aborts the run on the
//!   communicator (so the other devices stop too) and writes zeros; every later collective of
//!   the run then only writes zeros, and loops stop at their next test (`axle_rt_failed`), so
//!   the run ends in bounded time and [`run_as`] returns the error. Nothing panics across the
//!   C boundary.

use std::cell::RefCell;

use axle_analysis::Device;
use axle_comm::{Communicator, Op, OpKind};
use axle_ir::collective::{DeviceMesh, GroupMode};
use axle_ir::sdy::block_rows;
use axle_ir::{ElementType, Opcode};

/// What a collective host call does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CollKind {
    /// Each operand reduced over the group.
    AllReduce = 0,
    /// Each operand's members' values concatenated along `dim`.
    AllGather = 1,
    /// The reduction of each operand, this member's chunk along `dim`.
    ReduceScatter = 2,
    /// With `dim >= 0`, each operand split along `dim` and exchanged; with `dim < 0` (the
    /// tuple form) operand `k` goes to member `k`.
    AllToAll = 3,
    /// The value of the device whose pair targets this one, else zeros.
    Permute = 4,
    /// Member 0's value of each operand.
    Broadcast = 5,
    /// The device's replica id (`u32`).
    ReplicaId = 6,
    /// The device's partition id (`u32`).
    PartitionId = 7,
    /// `xla.sdy.GlobalToLocalShape`: this device's block of each global operand.
    GlobalToLocal = 8,
    /// `xla.sdy.LocalToGlobalShape`: the blocks of the devices of this replica, assembled.
    LocalToGlobal = 9,
}

impl CollKind {
    const ALL: [CollKind; 10] = [
        CollKind::AllReduce,
        CollKind::AllGather,
        CollKind::ReduceScatter,
        CollKind::AllToAll,
        CollKind::Permute,
        CollKind::Broadcast,
        CollKind::ReplicaId,
        CollKind::PartitionId,
        CollKind::GlobalToLocal,
        CollKind::LocalToGlobal,
    ];
}

/// An array's element type and dimensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Arr {
    pub ty: ElementType,
    pub dims: Vec<i64>,
}

impl Arr {
    /// Its size in bytes.
    pub fn bytes(&self) -> usize {
        self.dims
            .iter()
            .map(|&d| d.max(0) as usize)
            .product::<usize>()
            * self.ty.byte_size()
    }
}

/// A collective host call: buffers `[operands..., prefix..., results..., suffix...]`, where the
/// `prefix` output leaves receive copies of the operands (a `-start`'s tuple element 0) and the
/// `suffix` leaves are zeroed (a `-start`'s context).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Coll {
    pub kind: CollKind,
    /// The instruction's name, for messages and for matching devices' calls.
    pub label: String,
    pub mode: GroupMode,
    /// The replica groups, expanded (empty: one group of all).
    pub groups: Vec<Vec<i64>>,
    /// `collective-permute`'s source-target pairs.
    pub pairs: Vec<[i64; 2]>,
    /// The reducer's op (all-reduce, reduce-scatter).
    pub reducer: Option<Opcode>,
    /// The dimension gathered, scattered or split; -1 for none.
    pub dim: i64,
    pub operands: Vec<Arr>,
    /// Output leaves before the results that receive copies of the operands (0 or
    /// `operands.len()`).
    pub prefix: usize,
    pub results: Vec<Arr>,
    /// Output leaves after the results, zeroed.
    pub suffix: Vec<Arr>,
    /// The shard_map calls: per value, the block start of every device of its Shardy mesh
    /// (`devices * rank` entries, device-major); empty for other kinds.
    pub starts: Vec<Vec<i64>>,
    /// The number of devices of each value's Shardy mesh.
    pub sdy_devices: Vec<i64>,
    /// The devices the module is written for (`replica_count` x `num_partitions`): a run
    /// without a device runs a module for one device as that device ([`lone_world`]).
    pub module_devices: i64,
}

fn mode_code(m: GroupMode) -> i64 {
    match m {
        GroupMode::CrossReplica => 0,
        GroupMode::CrossPartition => 1,
        GroupMode::CrossReplicaAndPartition => 2,
        GroupMode::FlattenedId => 3,
    }
}

fn mode_of(c: i64) -> Option<GroupMode> {
    Some(match c {
        0 => GroupMode::CrossReplica,
        1 => GroupMode::CrossPartition,
        2 => GroupMode::CrossReplicaAndPartition,
        3 => GroupMode::FlattenedId,
        _ => return None,
    })
}

fn push_list(d: &mut Vec<i64>, v: &[i64]) {
    d.push(v.len() as i64);
    d.extend_from_slice(v);
}

fn push_arrs(d: &mut Vec<i64>, v: &[Arr]) {
    d.push(v.len() as i64);
    for a in v {
        let t = ElementType::ALL
            .iter()
            .position(|&t| t == a.ty)
            .unwrap_or(0);
        d.push(t as i64);
        push_list(d, &a.dims);
    }
}

/// Reads a descriptor's fields in order.
struct Reader<'a> {
    d: &'a [i64],
    at: usize,
}

impl Reader<'_> {
    fn next(&mut self) -> Option<i64> {
        let v = *self.d.get(self.at)?;
        self.at += 1;
        Some(v)
    }
    fn count(&mut self) -> Option<usize> {
        usize::try_from(self.next()?).ok()
    }
    fn list(&mut self) -> Option<Vec<i64>> {
        let n = self.count()?;
        let s = self.d.get(self.at..self.at.checked_add(n)?)?.to_vec();
        self.at += n;
        Some(s)
    }
    fn arrs(&mut self) -> Option<Vec<Arr>> {
        let n = self.count()?;
        (0..n)
            .map(|_| {
                let ty = *ElementType::ALL.get(self.count()?)?;
                Some(Arr {
                    ty,
                    dims: self.list()?,
                })
            })
            .collect()
    }
}

impl Coll {
    /// The descriptor's fields after its length: kind, label (one entry per byte), mode,
    /// groups, pairs, reducer (an index into [`Opcode::ALL`], -1 for none), dim, operands,
    /// prefix, results, suffix, sdy devices, starts (lists as their length and entries, arrays
    /// as an index into [`ElementType::ALL`] and their dimensions).
    pub fn encode_into(&self, d: &mut Vec<i64>) {
        d.push(self.kind as i64);
        let label: Vec<i64> = self.label.bytes().map(i64::from).collect();
        push_list(d, &label);
        d.push(mode_code(self.mode));
        d.push(self.groups.len() as i64);
        for g in &self.groups {
            push_list(d, g);
        }
        d.push(self.pairs.len() as i64);
        for p in &self.pairs {
            d.extend_from_slice(p);
        }
        d.push(
            self.reducer
                .and_then(|r| Opcode::ALL.iter().position(|&o| o == r))
                .map_or(-1, |k| k as i64),
        );
        d.push(self.dim);
        push_arrs(d, &self.operands);
        d.push(self.prefix as i64);
        push_arrs(d, &self.results);
        push_arrs(d, &self.suffix);
        push_list(d, &self.sdy_devices);
        d.push(self.starts.len() as i64);
        for s in &self.starts {
            push_list(d, s);
        }
        d.push(self.module_devices);
    }

    /// Reads what [`Coll::encode_into`] wrote (`d` without the length entry).
    pub fn decode(d: &[i64]) -> Option<Coll> {
        let mut r = Reader { d, at: 0 };
        let kind = *CollKind::ALL.get(r.count()?)?;
        let label = r.list()?;
        let label = String::from_utf8(label.iter().map(|&b| b as u8).collect()).ok()?;
        let mode = mode_of(r.next()?)?;
        let groups = (0..r.count()?)
            .map(|_| r.list())
            .collect::<Option<Vec<_>>>()?;
        let pairs = (0..r.count()?)
            .map(|_| Some([r.next()?, r.next()?]))
            .collect::<Option<Vec<_>>>()?;
        let reducer = match r.next()? {
            -1 => None,
            k => Some(*Opcode::ALL.get(usize::try_from(k).ok()?)?),
        };
        let dim = r.next()?;
        let operands = r.arrs()?;
        let prefix = r.count()?;
        let results = r.arrs()?;
        let suffix = r.arrs()?;
        let sdy_devices = r.list()?;
        let starts = (0..r.count()?)
            .map(|_| r.list())
            .collect::<Option<Vec<_>>>()?;
        let module_devices = r.next()?;
        (r.at == d.len()).then_some(Coll {
            kind,
            label,
            mode,
            groups,
            pairs,
            reducer,
            dim,
            operands,
            prefix,
            results,
            suffix,
            starts,
            sdy_devices,
            module_devices,
        })
    }
}

/// A world of one device, for a collective of a module written for one device run without a
/// device (as XLA runs a module of one replica and one partition: every group is that
/// device); `None` where the module, the collective's groups or pairs, or its Shardy mesh name
/// more devices than one: that collective needs a multi-device run.
fn lone_world(c: &Coll) -> Option<axle_comm::InProcess> {
    let only_zero =
        c.groups.iter().flatten().all(|&d| d == 0) && c.pairs.iter().flatten().all(|&d| d == 0);
    (c.module_devices == 1 && only_zero && c.sdy_devices.iter().all(|&n| n == 1))
        .then(axle_comm::InProcess::lone)
}

/// The device a thread runs as, and what its run has come to.
struct Slot {
    /// The endpoint, valid while [`run_as`] runs (its lifetime erased).
    comm: Option<*const (dyn Communicator + 'static)>,
    mesh: DeviceMesh,
    ftz: bool,
    /// The run's first failure.
    error: Option<String>,
}

thread_local! {
    static SLOT: RefCell<Slot> = const {
        RefCell::new(Slot {
            comm: None,
            mesh: DeviceMesh { replicas: 1, partitions: 1 },
            ftz: true,
            error: None,
        })
    };
}

/// Runs `f` (one run of an entry point) on this thread as device `dev` (or as no device),
/// with subnormals flushed in reductions if `ftz`; returns its value and the run's first
/// collective failure.
pub(crate) fn run_as<T>(
    dev: Option<Device<'_>>,
    ftz: bool,
    f: impl FnOnce() -> T,
) -> (T, Option<String>) {
    /// Puts the previous slot back, also when `f` unwinds.
    struct Restore(Option<Slot>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(s) = self.0.take() {
                SLOT.with(|slot| *slot.borrow_mut() = s);
            }
        }
    }
    let comm =
        dev.map(|d| {
            let p: *const (dyn Communicator + '_) = d.comm;
            // SAFETY: only the lifetime is erased; the pointer is used while this function runs
            // (`f`'s host calls) and the slot is restored before it returns or unwinds.
            unsafe {
                std::mem::transmute::<
                    *const (dyn Communicator + '_),
                    *const (dyn Communicator + 'static),
                >(p)
            }
        });
    let mesh = dev.map_or(
        DeviceMesh {
            replicas: 1,
            partitions: 1,
        },
        |d| d.mesh,
    );
    let prev = SLOT.with(|s| {
        std::mem::replace(
            &mut *s.borrow_mut(),
            Slot {
                comm,
                mesh,
                ftz,
                error: None,
            },
        )
    });
    let mut restore = Restore(Some(prev));
    let v = f();
    let prev = restore.0.take().expect("the previous slot");
    let now = SLOT.with(|s| std::mem::replace(&mut *s.borrow_mut(), prev));
    (v, now.error)
}

/// Whether this thread's run has failed (loops test it to stop).
pub(crate) extern "C" fn axle_rt_failed() -> u8 {
    SLOT.with(|s| s.try_borrow().map_or(1, |s| s.error.is_some() as u8))
}

/// Runs collective `c` on the buffer table `bufs` as this thread's device; a failure is
/// recorded in the slot (and aborts the run), and the outputs are zeroed.
///
/// # Safety
/// `bufs` must hold the operand buffers and then the output leaves `c` describes, of their
/// sizes.
pub(crate) unsafe fn run(c: &Coll, bufs: *const *mut u8) {
    let n_in = c.operands.len();
    let out_arrs: Vec<&Arr> = c
        .operands
        .iter()
        .take(c.prefix)
        .chain(&c.results)
        .chain(&c.suffix)
        .collect();
    let ptr = |k: usize| {
        // SAFETY: the table has an entry per operand and output leaf (the caller's contract).
        unsafe { *bufs.add(k) }
    };
    let ranges: Vec<(usize, usize)> = c
        .operands
        .iter()
        .chain(out_arrs.iter().copied())
        .enumerate()
        .map(|(k, a)| (ptr(k) as usize, a.bytes()))
        .collect();
    // Outputs are buffers of their own (host calls never work in place); should one overlap
    // an operand all the same, the operands are read into copies first.
    let overlap = ranges[n_in..].iter().any(|&(o, ol)| {
        ranges[..n_in]
            .iter()
            .any(|&(i, il)| ol > 0 && il > 0 && o < i + il && i < o + ol)
    });
    let owned: Vec<Vec<u8>> = if overlap {
        // SAFETY: operand `k` holds `a.bytes()` bytes.
        (0..n_in)
            .map(|k| unsafe { super::read::<u8>(ptr(k), ranges[k].1) })
            .collect()
    } else {
        Vec::new()
    };
    let ins: Vec<&[u8]> = (0..n_in)
        .map(|k| match owned.get(k) {
            Some(o) => &o[..],
            None if ranges[k].1 == 0 => &[][..],
            // SAFETY: operand `k` holds `ranges[k].1` bytes, which no output overlaps.
            None => unsafe { std::slice::from_raw_parts(ptr(k), ranges[k].1) },
        })
        .collect();
    let mut outs: Vec<&mut [u8]> = (n_in..ranges.len())
        .map(|k| match ranges[k].1 {
            0 => &mut [][..],
            // SAFETY: output leaf `k` holds `ranges[k].1` bytes, distinct from every other
            // leaf and (or copied above) from the operands.
            n => unsafe { std::slice::from_raw_parts_mut(ptr(k), n) },
        })
        .collect();
    let (comm, mesh, ftz, failed) = SLOT.with(|s| {
        let s = s.borrow();
        (s.comm, s.mesh, s.ftz, s.error.is_some())
    });
    let mut ok = false;
    if !failed {
        // SAFETY: the slot's endpoint is valid while `run_as` runs, which called the entry
        // point that called this.
        let dev = comm.map(|p| Device {
            comm: unsafe { &*p },
            mesh,
        });
        let lone = dev.is_none().then(|| lone_world(c)).flatten();
        let lone_ep = lone.as_ref().map(|w| w.devices());
        let dev = dev.or_else(|| {
            lone_ep.as_ref().map(|e| Device {
                comm: &e[0],
                mesh: DeviceMesh {
                    replicas: 1,
                    partitions: 1,
                },
            })
        });
        for k in 0..c.prefix {
            outs[k].copy_from_slice(ins[k]);
        }
        let results = &mut outs[c.prefix..c.prefix + c.results.len()];
        match compute(c, dev, ftz, &ins, results) {
            Ok(()) => ok = true,
            Err(msg) => {
                let msg = format!("{} ({}): {msg}", c.label, describe(c));
                if let Some(d) = dev {
                    d.comm.abort(&msg);
                }
                SLOT.with(|s| {
                    let mut s = s.borrow_mut();
                    if s.error.is_none() {
                        s.error = Some(msg);
                    }
                });
            }
        }
    }
    let n_out = outs.len();
    for (k, o) in outs.iter_mut().enumerate() {
        // Zeros for a failed run, and for a `-start`'s context.
        if !ok || k >= n_out - c.suffix.len() {
            o.fill(0);
        }
    }
}

fn describe(c: &Coll) -> &'static str {
    match c.kind {
        CollKind::AllReduce => "all-reduce",
        CollKind::AllGather => "all-gather",
        CollKind::ReduceScatter => "reduce-scatter",
        CollKind::AllToAll => "all-to-all",
        CollKind::Permute => "collective-permute",
        CollKind::Broadcast => "collective-broadcast",
        CollKind::ReplicaId => "replica-id",
        CollKind::PartitionId => "partition-id",
        CollKind::GlobalToLocal => "xla.sdy.GlobalToLocalShape",
        CollKind::LocalToGlobal => "xla.sdy.LocalToGlobalShape",
    }
}

/// Row-major `(outer, inner bytes)` around dimension `d` of `dims` with elements of `w` bytes.
fn around(dims: &[i64], d: usize, w: usize) -> (usize, usize) {
    let outer: i64 = dims[..d].iter().product();
    let inner: i64 = dims[d + 1..].iter().product();
    (outer.max(0) as usize, inner.max(0) as usize * w)
}

/// `data` (of `dims`) split into `k` equal chunks along dimension `d`.
fn split(data: &[u8], dims: &[i64], d: usize, k: usize, w: usize) -> Result<Vec<Vec<u8>>, String> {
    let n = dims[d].max(0) as usize;
    if k == 0 || !n.is_multiple_of(k) {
        return Err(format!(
            "dimension {d} of size {n} does not split into {k} chunks"
        ));
    }
    let (outer, inner) = around(dims, d, w);
    let c = n / k * inner;
    let mut out = vec![Vec::with_capacity(outer * c); k];
    for o in 0..outer {
        let block = &data[o * n * inner..(o + 1) * n * inner];
        for (j, chunk) in out.iter_mut().enumerate() {
            chunk.extend_from_slice(&block[j * c..(j + 1) * c]);
        }
    }
    Ok(out)
}

/// Equal chunks concatenated along dimension `d` into `out` (of `dims`).
fn join(parts: &[Vec<u8>], dims: &[i64], d: usize, w: usize, out: &mut [u8]) -> Result<(), String> {
    let (outer, _) = around(dims, d, w);
    if parts.iter().map(Vec::len).sum::<usize>() != out.len() {
        return Err("the pieces received do not fill the result".into());
    }
    let mut at = 0;
    for o in 0..outer {
        for p in parts {
            let c = p.len() / outer;
            out[at..at + c].copy_from_slice(&p[o * c..(o + 1) * c]);
            at += c;
        }
    }
    Ok(())
}

fn need<'a>(dev: Option<Device<'a>>, c: &Coll) -> Result<Device<'a>, String> {
    dev.ok_or_else(|| {
        format!(
            "{} needs a multi-device run (`axle run --devices N`, or \
             CpuExecutable::execute_on_device)",
            describe(c)
        )
    })
}

fn comm_err(e: axle_comm::CommError) -> String {
    e.to_string()
}

/// The devices `c` meets on `dev`, in group order.
fn participants(c: &Coll, dev: Device<'_>) -> Result<Vec<u32>, String> {
    dev.mesh
        .participants(dev.comm.device(), &c.groups, c.mode)
        .map_err(String::from)
}

/// Device `dev`'s place in a Shardy mesh of `n` devices: its partition id.
fn sdy_place(dev: Device<'_>, n: i64) -> Result<usize, String> {
    if n != dev.mesh.partitions as i64 {
        return Err(format!(
            "the shard_map's mesh has {n} devices but the run has {} partitions",
            dev.mesh.partitions
        ));
    }
    Ok(dev.mesh.partition_of(dev.comm.device()) as usize)
}

fn compute(
    c: &Coll,
    dev: Option<Device<'_>>,
    ftz: bool,
    ins: &[&[u8]],
    outs: &mut [&mut [u8]],
) -> Result<(), String> {
    let op = |kind| Op {
        kind,
        label: &c.label,
    };
    let dim = usize::try_from(c.dim).ok();
    match c.kind {
        CollKind::ReplicaId | CollKind::PartitionId => {
            let v = match dev {
                None => 0,
                Some(d) if c.kind == CollKind::ReplicaId => d.mesh.replica_of(d.comm.device()),
                Some(d) => d.mesh.partition_of(d.comm.device()),
            };
            outs[0].copy_from_slice(&v.to_le_bytes());
        }
        CollKind::AllReduce | CollKind::ReduceScatter => {
            let dev = need(dev, c)?;
            let group = participants(c, dev)?;
            let rop = c.reducer.ok_or("the reduction has no reducer")?;
            for (k, (a, data)) in c.operands.iter().zip(ins).enumerate() {
                let ty = a.ty;
                let mut r = Vec::new();
                let mut reduce = |acc: &mut [u8], x: &[u8]| -> Result<(), String> {
                    if acc.len() != x.len() {
                        return Err("members' buffers differ in size".into());
                    }
                    r.resize(acc.len(), 0);
                    axle_analysis::eval::binary_elementwise(rop, ty, acc, x, &mut r, ftz)?;
                    acc.copy_from_slice(&r);
                    Ok(())
                };
                let sum = dev
                    .comm
                    .all_reduce(op(OpKind::AllReduce), &group, data, &mut reduce)
                    .map_err(comm_err)?;
                if c.kind == CollKind::AllReduce {
                    if sum.len() != outs[k].len() {
                        return Err("the reduction has the wrong size".into());
                    }
                    outs[k].copy_from_slice(&sum);
                } else {
                    let d = dim.ok_or("reduce-scatter needs a dimension")?;
                    let rank = group
                        .iter()
                        .position(|&x| x == dev.comm.device())
                        .ok_or("this device is not in its group")?;
                    let mut chunks = split(&sum, &a.dims, d, group.len(), ty.byte_size())?;
                    let mine = std::mem::take(&mut chunks[rank]);
                    if mine.len() != outs[k].len() {
                        return Err(format!(
                            "scattering over {} devices does not give the result's shape",
                            group.len()
                        ));
                    }
                    outs[k].copy_from_slice(&mine);
                }
            }
        }
        CollKind::AllGather => {
            let dev = need(dev, c)?;
            let group = participants(c, dev)?;
            let d = dim.ok_or("all-gather needs a dimension")?;
            for (k, (a, data)) in c.operands.iter().zip(ins).enumerate() {
                let parts = dev
                    .comm
                    .all_gather(op(OpKind::AllGather), &group, data)
                    .map_err(comm_err)?;
                let want = &c.results[k].dims;
                let mut dims = a.dims.clone();
                dims[d] *= group.len() as i64;
                if *want != dims {
                    return Err(format!(
                        "gathering {} devices gives dimensions {dims:?}, but the result has {want:?}",
                        group.len()
                    ));
                }
                join(&parts, &dims, d, a.ty.byte_size(), outs[k])?;
            }
        }
        CollKind::AllToAll => {
            let dev = need(dev, c)?;
            let group = participants(c, dev)?;
            if let Some(d) = dim {
                for (k, (a, data)) in c.operands.iter().zip(ins).enumerate() {
                    let w = a.ty.byte_size();
                    let chunks = split(data, &a.dims, d, group.len(), w)?;
                    let refs: Vec<&[u8]> = chunks.iter().map(|x| &x[..]).collect();
                    let got = dev
                        .comm
                        .all_to_all(op(OpKind::AllToAll), &group, &refs)
                        .map_err(comm_err)?;
                    join(&got, &a.dims, d, w, outs[k])?;
                }
            } else {
                if ins.len() != group.len() {
                    return Err(format!(
                        "the tuple form needs one operand per group member ({}), got {}",
                        group.len(),
                        ins.len()
                    ));
                }
                let got = dev
                    .comm
                    .all_to_all(op(OpKind::AllToAll), &group, ins)
                    .map_err(comm_err)?;
                for (o, g) in outs.iter_mut().zip(got) {
                    if o.len() != g.len() {
                        return Err("a received chunk has the wrong size".into());
                    }
                    o.copy_from_slice(&g);
                }
            }
        }
        CollKind::Permute => {
            let dev = need(dev, c)?;
            let (to, from) = dev
                .mesh
                .permute_peers(dev.comm.device(), &c.pairs, c.mode)?;
            let got = dev
                .comm
                .permute(op(OpKind::Permute), &to, from, ins[0])
                .map_err(comm_err)?;
            match got {
                Some(g) if g.len() == outs[0].len() => outs[0].copy_from_slice(&g),
                Some(_) => return Err("the received buffer has the wrong size".into()),
                None => outs[0].fill(0),
            }
        }
        CollKind::Broadcast => {
            let dev = need(dev, c)?;
            let group = participants(c, dev)?;
            for (k, data) in ins.iter().enumerate() {
                let v = dev
                    .comm
                    .broadcast(op(OpKind::Broadcast), &group, 0, data)
                    .map_err(comm_err)?;
                if v.len() != outs[k].len() {
                    return Err("the broadcast value has the wrong size".into());
                }
                outs[k].copy_from_slice(&v);
            }
        }
        CollKind::GlobalToLocal => {
            let dev = need(dev, c)?;
            for (k, (a, data)) in c.operands.iter().zip(ins).enumerate() {
                let p = sdy_place(dev, c.sdy_devices[k])?;
                let rank = a.dims.len();
                let start = &c.starts[k][p * rank..(p + 1) * rank];
                let out = &mut *outs[k];
                block_rows(
                    &a.dims,
                    &c.results[k].dims,
                    start,
                    a.ty.byte_size(),
                    |g, l, n| out[l..l + n].copy_from_slice(&data[g..g + n]),
                );
            }
        }
        CollKind::LocalToGlobal => {
            let dev = need(dev, c)?;
            let me = dev.comm.device();
            let r = dev.mesh.replica_of(me);
            let group: Vec<u32> = (0..dev.mesh.partitions)
                .map(|p| dev.mesh.device(r, p))
                .collect();
            for (k, (a, data)) in c.operands.iter().zip(ins).enumerate() {
                sdy_place(dev, c.sdy_devices[k])?;
                let parts = dev
                    .comm
                    .all_gather(op(OpKind::AllGather), &group, data)
                    .map_err(comm_err)?;
                let gdims = c.results[k].dims.clone();
                let rank = gdims.len();
                for (j, part) in parts.iter().enumerate() {
                    if part.len() != data.len() {
                        return Err(format!("device {j}'s block has the wrong size"));
                    }
                    let start = &c.starts[k][j * rank..(j + 1) * rank];
                    let out = &mut *outs[k];
                    block_rows(&gdims, &a.dims, start, a.ty.byte_size(), |g, l, n| {
                        out[g..g + n].copy_from_slice(&part[l..l + n])
                    });
                }
            }
        }
    }
    Ok(())
}
