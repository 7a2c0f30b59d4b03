//! [`InProcess`]: N devices as threads of one process, meeting in shared memory.
//!
//! Every device's `k`-th collective posts its buffers under sequence number `k` in one table
//! behind a mutex, then waits on a condition variable until every member of its group has
//! posted there, and copies out what it needs. Posts are checked against each other as they
//! meet: members of one group must post the same description (kind, group, byte counts), else
//! the run is aborted with [`CommError::Mismatch`]. A sequence number's entry is dropped when
//! every device of the run has read it. Waiting is bounded by the run's timeout; a timeout or
//! an [`Communicator::abort`] wakes every waiting device with an error.

use crate::{rank_in_group, CommError, Communicator, DeviceId, Op, OpKind};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What a device hands the others at one sequence number.
struct Payload {
    /// For permutes: the devices it sends to.
    to: Vec<DeviceId>,
    /// Its buffers (one, or one per member for all-to-all).
    chunks: Vec<Vec<u8>>,
}

/// One device's post at one sequence number.
struct Post {
    /// What it called, with its group and byte counts; equal among a group's members.
    desc: String,
    group: Arc<[DeviceId]>,
    payload: Arc<Payload>,
}

#[derive(Default)]
struct Seq {
    /// Posts by device.
    posts: HashMap<DeviceId, Post>,
    /// Devices that have read their results.
    done: usize,
}

#[derive(Default)]
struct State {
    seqs: HashMap<u64, Seq>,
    aborted: Option<(DeviceId, String)>,
    /// Devices that finished their programs, with how many collectives they made.
    finished: HashMap<DeviceId, u64>,
}

struct Shared {
    n: u32,
    timeout: Duration,
    state: Mutex<State>,
    cv: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A device thread that panicked while holding the lock leaves valid data (every update
        // is a single insert or counter bump), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A run of `N` in-process devices; hand one [`InProcessDevice`] to each device's thread.
#[derive(Clone)]
pub struct InProcess {
    shared: Arc<Shared>,
}

impl InProcess {
    /// A run of `num_devices` devices whose collectives wait at most `timeout` for the other
    /// members of their group.
    pub fn new(num_devices: u32, timeout: Duration) -> InProcess {
        InProcess {
            shared: Arc::new(Shared {
                n: num_devices,
                timeout,
                state: Mutex::new(State::default()),
                cv: Condvar::new(),
            }),
        }
    }

    /// A run of one device, for a module written for one device run without a device (every
    /// group is that device, as XLA runs a module of one replica and one partition). Its
    /// collectives never wait for another member; the timeout only bounds a wait that cannot
    /// happen.
    pub fn lone() -> InProcess {
        InProcess::new(1, Duration::from_secs(60))
    }

    /// The endpoints of devices `0..N`, in order.
    pub fn devices(&self) -> Vec<InProcessDevice> {
        (0..self.shared.n)
            .map(|d| InProcessDevice {
                shared: self.shared.clone(),
                device: d,
                seq: AtomicU64::new(0),
            })
            .collect()
    }

    /// The first abort of the run, if any: the device and its reason.
    pub fn aborted(&self) -> Option<(DeviceId, String)> {
        self.shared.lock().aborted.clone()
    }
}

/// One device's endpoint of an [`InProcess`] run.
pub struct InProcessDevice {
    shared: Arc<Shared>,
    device: DeviceId,
    seq: AtomicU64,
}

fn abort_locked(st: &mut State, device: DeviceId, reason: String) {
    if st.aborted.is_none() {
        st.aborted = Some((device, reason));
    }
}

impl InProcessDevice {
    fn invalid(&self, msg: String) -> CommError {
        CommError::Invalid {
            device: self.device,
            msg,
        }
    }

    /// Checks `group` ([`rank_in_group`]); returns this device's rank in it.
    fn rank_in(&self, group: &[DeviceId]) -> Result<usize, CommError> {
        rank_in_group(self.device, self.shared.n, group, "the run's {n} devices")
    }

    /// Posts `chunks` as this device's next collective and waits for every member of `group`;
    /// returns every member's chunks in group order.
    fn exchange(
        &self,
        op: Op<'_>,
        group: &[DeviceId],
        to: Vec<DeviceId>,
        chunks: Vec<Vec<u8>>,
    ) -> Result<Vec<Arc<Payload>>, CommError> {
        let seq = self.seq.fetch_add(1, Ordering::SeqCst);
        let sizes: Vec<usize> = chunks.iter().map(Vec::len).collect();
        let desc = format!("{} of {sizes:?} bytes over group {group:?}", op.kind);
        let shared = &*self.shared;
        let deadline = Instant::now() + shared.timeout;
        let mut st = shared.lock();
        if let Some((device, reason)) = &st.aborted {
            return Err(CommError::Aborted {
                device: *device,
                reason: reason.clone(),
            });
        }
        let group: Arc<[DeviceId]> = group.into();
        let entry = st.seqs.entry(seq).or_default();
        // Members that posted already must agree with this post.
        for &d in group.iter() {
            if let Some(p) = entry.posts.get(&d) {
                if p.desc != desc {
                    let err = CommError::Mismatch {
                        seq,
                        first: format!("device {d} ({}) calls {}", op.label, p.desc),
                        second: format!("device {} ({}) calls {desc}", self.device, op.label),
                    };
                    abort_locked(&mut st, self.device, err.to_string());
                    shared.cv.notify_all();
                    return Err(err);
                }
            }
        }
        entry.posts.insert(
            self.device,
            Post {
                desc: desc.clone(),
                group: group.clone(),
                payload: Arc::new(Payload { to, chunks }),
            },
        );
        shared.cv.notify_all();
        loop {
            if let Some((device, reason)) = &st.aborted {
                return Err(CommError::Aborted {
                    device: *device,
                    reason: reason.clone(),
                });
            }
            let entry = st.seqs.get(&seq).expect("posted above");
            // A member that posted something else under this number (another group, another
            // op) will never post what this device waits for.
            for &d in group.iter() {
                if let Some(p) = entry.posts.get(&d) {
                    if p.desc != desc || p.group != group {
                        let err = CommError::Mismatch {
                            seq,
                            first: format!("device {} ({}) calls {desc}", self.device, op.label),
                            second: format!("device {d} calls {}", p.desc),
                        };
                        abort_locked(&mut st, self.device, err.to_string());
                        shared.cv.notify_all();
                        return Err(err);
                    }
                }
            }
            if group.iter().all(|d| entry.posts.contains_key(d)) {
                let parts: Vec<Arc<Payload>> = group
                    .iter()
                    .map(|d| entry.posts[d].payload.clone())
                    .collect();
                let entry = st.seqs.get_mut(&seq).expect("posted above");
                entry.done += 1;
                if entry.done == shared.n as usize {
                    st.seqs.remove(&seq);
                }
                return Ok(parts);
            }
            // A member that finished its program will never arrive.
            if let Some((&d, &n)) = group
                .iter()
                .filter(|d| !entry.posts.contains_key(d))
                .find_map(|d| st.finished.get_key_value(d))
            {
                let err = CommError::Mismatch {
                    seq,
                    first: format!("device {} ({}) calls {desc}", self.device, op.label),
                    second: format!(
                        "device {d} finished its program after {n} collective{}",
                        if n == 1 { "" } else { "s" }
                    ),
                };
                abort_locked(&mut st, self.device, err.to_string());
                shared.cv.notify_all();
                return Err(err);
            }
            let now = Instant::now();
            if now >= deadline {
                let missing: Vec<DeviceId> = group
                    .iter()
                    .copied()
                    .filter(|d| !entry.posts.contains_key(d))
                    .collect();
                let err = CommError::Timeout {
                    device: self.device,
                    seq,
                    what: format!("{} {}", op.kind, op.label),
                    timeout: shared.timeout,
                    missing,
                };
                abort_locked(&mut st, self.device, err.to_string());
                shared.cv.notify_all();
                return Err(err);
            }
            st = shared
                .cv
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Communicator for InProcessDevice {
    fn device(&self) -> DeviceId {
        self.device
    }

    fn num_devices(&self) -> u32 {
        self.shared.n
    }

    fn all_gather(
        &self,
        op: Op<'_>,
        group: &[DeviceId],
        data: &[u8],
    ) -> Result<Vec<Vec<u8>>, CommError> {
        self.rank_in(group)?;
        let parts = self.exchange(op, group, Vec::new(), vec![data.to_vec()])?;
        Ok(parts
            .iter()
            .map(|p| p.chunks.first().cloned().unwrap_or_default())
            .collect())
    }

    fn all_to_all(
        &self,
        op: Op<'_>,
        group: &[DeviceId],
        chunks: &[&[u8]],
    ) -> Result<Vec<Vec<u8>>, CommError> {
        let rank = self.rank_in(group)?;
        if chunks.len() != group.len() {
            return Err(self.invalid(format!(
                "all-to-all over a group of {} takes {} chunks, got {}",
                group.len(),
                group.len(),
                chunks.len()
            )));
        }
        let op = Op {
            kind: OpKind::AllToAll,
            label: op.label,
        };
        let parts = self.exchange(
            op,
            group,
            Vec::new(),
            chunks.iter().map(|c| c.to_vec()).collect(),
        )?;
        Ok(parts.iter().map(|p| p.chunks[rank].clone()).collect())
    }

    fn permute(
        &self,
        op: Op<'_>,
        to: &[DeviceId],
        from: Option<DeviceId>,
        data: &[u8],
    ) -> Result<Option<Vec<u8>>, CommError> {
        let all: Vec<DeviceId> = (0..self.shared.n).collect();
        for &d in to.iter().chain(from.iter()) {
            if d >= self.shared.n {
                return Err(self.invalid(format!(
                    "permute peer {d} is outside the run's {} devices",
                    self.shared.n
                )));
            }
        }
        let op = Op {
            kind: OpKind::Permute,
            label: op.label,
        };
        // Every device posts its buffer; a receiver reads its sender's (checked to list it).
        let parts = self.exchange(op, &all, to.to_vec(), vec![data.to_vec()])?;
        let Some(from) = from else {
            return Ok(None);
        };
        let sender = &parts[from as usize];
        if !sender.to.contains(&self.device) {
            let err = self.invalid(format!(
                "permute {}: expects data from device {from}, which does not send to it",
                op.label
            ));
            self.abort(&err.to_string());
            return Err(err);
        }
        Ok(Some(sender.chunks.first().cloned().unwrap_or_default()))
    }

    fn abort(&self, reason: &str) {
        let mut st = self.shared.lock();
        abort_locked(&mut st, self.device, reason.to_string());
        self.shared.cv.notify_all();
    }

    fn finish(&self) {
        let mut st = self.shared.lock();
        st.finished
            .insert(self.device, self.seq.load(Ordering::SeqCst));
        self.shared.cv.notify_all();
    }
}
