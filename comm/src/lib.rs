//! Collectives between devices over byte buffers: the [`Communicator`] trait every transport
//! implements, and [`InProcess`], N devices as threads of one process sharing memory (run by
//! [`run_device_threads`]).
//!
//! The trait knows devices, groups and bytes, nothing of HLO: callers (the evaluator, later the
//! cpu runtime) turn an instruction into a group of device ids (in group order) and buffers.
//! Invariants every implementation keeps:
//! - Results are in group order: [`Communicator::all_gather`] returns member `k`'s buffer at
//!   index `k`, and [`Communicator::all_reduce`] folds the members' buffers left to right in
//!   group order (`((b0 + b1) + b2) + ...`) with the caller's reducer, so the bits are the same
//!   on every device and whichever transport runs the program.
//! - Every device of a group must call the same operation (same [`OpKind`], same group, same
//!   byte counts) as its same-numbered collective; a mismatch is an error on every device of
//!   the run, never a hang.
//! - A device that fails calls [`Communicator::abort`]; every device then waiting or later
//!   calling gets [`CommError::Aborted`] naming it and its reason. A device that has finished
//!   its program ([`Communicator::finish`]) fails the devices waiting for it at once; one that
//!   never arrives makes the others fail with [`CommError::Timeout`] after the run's timeout.
#![deny(missing_docs)]

mod device_threads;
mod group;
mod in_process;

pub use device_threads::{outputs_and_slowest_runs, run_device_threads};
pub use group::rank_in_group;
pub use in_process::{InProcess, InProcessDevice};

use std::fmt;
use std::time::Duration;

/// A device's id in a run: `0..num_devices`.
pub type DeviceId = u32;

/// The kind of a collective, for matching the calls of the devices of a group and for errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Every member gets every member's buffer.
    AllGather,
    /// Every member gets the reduction of every member's buffer.
    AllReduce,
    /// Member `j` gets chunk `j` of every member.
    AllToAll,
    /// Point-to-point sends along source-target pairs.
    Permute,
    /// Every member gets the root's buffer.
    Broadcast,
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpKind::AllGather => "all-gather",
            OpKind::AllReduce => "all-reduce",
            OpKind::AllToAll => "all-to-all",
            OpKind::Permute => "permute",
            OpKind::Broadcast => "broadcast",
        })
    }
}

/// What a collective is, for errors: its kind and a label naming it in the program (such as
/// the instruction's name).
#[derive(Clone, Copy, Debug)]
pub struct Op<'a> {
    /// The operation.
    pub kind: OpKind,
    /// What the program calls it (an instruction name); only for messages.
    pub label: &'a str,
}

/// A collective that could not complete.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommError {
    /// Another device failed (or this one did) and aborted the run.
    #[error("the run was aborted: device {device} failed: {reason}")]
    Aborted {
        /// The device that aborted first.
        device: DeviceId,
        /// Why.
        reason: String,
    },
    /// Devices of the group did not arrive within the timeout.
    #[error(
        "device {device}: collective #{seq} ({what}) timed out after {timeout:?} waiting for \
         devices {missing:?}"
    )]
    Timeout {
        /// The device reporting.
        device: DeviceId,
        /// Its collective's sequence number.
        seq: u64,
        /// The collective.
        what: String,
        /// How long it waited.
        timeout: Duration,
        /// The devices that had not arrived.
        missing: Vec<DeviceId>,
    },
    /// The devices of a group called different collectives.
    #[error("collective #{seq} differs between devices: {first} but {second}")]
    Mismatch {
        /// The sequence number.
        seq: u64,
        /// What the first device called.
        first: String,
        /// What another device called.
        second: String,
    },
    /// A malformed call: a group without this device, a device id out of range, buffers of
    /// different sizes where they must agree.
    #[error("device {device}: {msg}")]
    Invalid {
        /// The device reporting.
        device: DeviceId,
        /// What is wrong.
        msg: String,
    },
    /// The caller's reducer failed.
    #[error("device {device}: reducing: {msg}")]
    Reduce {
        /// The device reporting.
        device: DeviceId,
        /// The reducer's message.
        msg: String,
    },
}

/// A reduction step: `reduce(acc, x)` folds buffer `x` into `acc` (same length), or says why
/// it cannot.
pub type Reducer<'a> = dyn FnMut(&mut [u8], &[u8]) -> Result<(), String> + 'a;

/// A device's endpoint in a run of several devices.
///
/// Each collective call is the device's next one in sequence; devices meet at calls of the
/// same sequence number, so every device must make the same sequence of calls (as SPMD
/// programs do). Groups are lists of device ids in group order and must contain the caller.
pub trait Communicator: Send + Sync {
    /// This device's id.
    fn device(&self) -> DeviceId;

    /// The number of devices in the run.
    fn num_devices(&self) -> u32;

    /// Every member's `data`, in group order (this device's own at its index).
    fn all_gather(
        &self,
        op: Op<'_>,
        group: &[DeviceId],
        data: &[u8],
    ) -> Result<Vec<Vec<u8>>, CommError>;

    /// Chunk `k` of `chunks` goes to member `k` of `group` (`chunks.len() == group.len()`);
    /// returns the chunk each member sent this device, in group order.
    fn all_to_all(
        &self,
        op: Op<'_>,
        group: &[DeviceId],
        chunks: &[&[u8]],
    ) -> Result<Vec<Vec<u8>>, CommError>;

    /// Sends `data` to every device of `to` and receives from `from` (if any). All devices of
    /// the run take part in each permute (with empty `to` and `None` when they have no pair),
    /// so the sequence numbers stay aligned.
    fn permute(
        &self,
        op: Op<'_>,
        to: &[DeviceId],
        from: Option<DeviceId>,
        data: &[u8],
    ) -> Result<Option<Vec<u8>>, CommError>;

    /// Ends the run: every device waiting in or later entering a collective gets
    /// [`CommError::Aborted`] with this device and `reason`. The first abort wins.
    fn abort(&self, reason: &str);

    /// Says this device has run its whole program and will call no more collectives: a device
    /// waiting for it then fails at once with [`CommError::Mismatch`] (the programs differ)
    /// instead of waiting for the timeout. The default does nothing (the timeout still ends
    /// such a wait).
    fn finish(&self) {}

    /// The reduction of every member's `data` with `reduce` (`reduce(acc, x)` folds `x` into
    /// `acc`), folded left to right in group order from member 0's buffer. The default
    /// gathers the buffers and folds them locally, which gives the same bits on every device.
    fn all_reduce(
        &self,
        op: Op<'_>,
        group: &[DeviceId],
        data: &[u8],
        reduce: &mut Reducer<'_>,
    ) -> Result<Vec<u8>, CommError> {
        let op = Op {
            kind: OpKind::AllReduce,
            label: op.label,
        };
        let mut parts = self.all_gather(op, group, data)?.into_iter();
        let mut acc = parts.next().unwrap_or_default();
        for p in parts {
            reduce(&mut acc, &p).map_err(|msg| CommError::Reduce {
                device: self.device(),
                msg,
            })?;
        }
        Ok(acc)
    }

    /// The buffer of member `root` of `group`, on every member (`data` matters on the root
    /// only). The default gathers and keeps the root's.
    fn broadcast(
        &self,
        op: Op<'_>,
        group: &[DeviceId],
        root: usize,
        data: &[u8],
    ) -> Result<Vec<u8>, CommError> {
        let op = Op {
            kind: OpKind::Broadcast,
            label: op.label,
        };
        if root >= group.len() {
            return Err(CommError::Invalid {
                device: self.device(),
                msg: format!(
                    "broadcast root {root} is outside a group of {}",
                    group.len()
                ),
            });
        }
        let mut parts = self.all_gather(op, group, data)?;
        Ok(std::mem::take(&mut parts[root]))
    }
}
