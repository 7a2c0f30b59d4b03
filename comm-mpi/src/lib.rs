//! [`Mpi`]: Axle's [`Communicator`] over MPI, one device per rank of `MPI_COMM_WORLD` (device
//! `d` is rank `d`), through rsmpi over the system's MPI library (Debian's Open MPI).
//!
//! Every collective is two steps on the whole world, since every device takes part in every
//! collective (SPMD: all devices run the same program) while groups differ per device:
//! 1. a header exchange (`MPI_Alltoall` of one fixed record per pair of ranks: the operation's
//!    kind, a hash of its label (the instruction) and group, the bytes the sender will send the receiver, the sequence
//!    number), checked on receipt: every member of this device's group must have called the
//!    same instruction on the same group with matching byte counts, at the same sequence
//!    number, else the call fails with [`CommError::Mismatch`] naming both sides (a member
//!    that has finished its program reports so);
//! 2. the data: `all_gather` is `MPI_Allgatherv` when the group is the whole world (then every
//!    device's group is) and `MPI_Alltoallv` to the group's members otherwise; `all_to_all` is
//!    `MPI_Alltoallv`; `permute` is point-to-point (non-blocking sends to the targets, a
//!    receive from the source), tagged with the sequence number.
//!
//! `all_reduce` and `broadcast` keep the trait's defaults (gather, then fold left to right in
//! group order), so the bits are the in-process transport's.
//!
//! Faults end the whole job in bounded time: [`Communicator::abort`] prints the reason and
//! calls `MPI_Abort` (mpirun then ends every rank); a collective that has waited longer than
//! the timeout is reported by a watchdog thread, which aborts the job the same way; a rank
//! that dies is noticed by mpirun, which ends the others. [`Communicator::finish`] takes part
//! in a header exchange as "finished", so ranks still waiting in a collective learn that the
//! programs differ; afterwards the ranks may still make collectives that all of them make
//! (`axle run` gathers the outputs on rank 0 that way).
//!
//! MPI calls are serialized by a mutex (the library is initialized with
//! `MPI_THREAD_MULTIPLE` when it offers it, which the watchdog's abort needs; otherwise the
//! watchdog exits the process, which mpirun also treats as a failed rank).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axle_comm::{rank_in_group, CommError, Communicator, DeviceId, Op, OpKind};
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator as _, CommunicatorCollectives, Destination, Source};
use mpi::Threading;

/// The launchers' environment variables: one that says a launcher started this process, and
/// the one holding its rank, for Open MPI, PMIx and PMI, in the order they are read.
const LAUNCHERS: [(&str, &str); 3] = [
    ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"),
    ("PMIX_RANK", "PMIX_RANK"),
    ("PMI_SIZE", "PMI_RANK"),
];

/// This process's start by an MPI launcher, as the launcher's environment says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// The rank the launcher gave this process, as written (trimmed); `None` when the
    /// launcher set none of the rank variables.
    pub rank: Option<String>,
}

impl Launch {
    /// Whether this process speaks for the job: rank 0, or a launch that names no rank.
    pub fn is_rank0(&self) -> bool {
        self.rank.as_deref().is_none_or(|r| r == "0")
    }
}

/// How an MPI launcher (`mpirun`, `mpiexec`, `srun` with PMI) started this process, or `None`
/// when none did: Open MPI's `OMPI_COMM_WORLD_SIZE`, or PMI(x) variables.
pub fn launch() -> Option<Launch> {
    let var = |v: &str| std::env::var_os(v);
    LAUNCHERS
        .iter()
        .any(|(set, _)| var(set).is_some())
        .then(|| Launch {
            rank: LAUNCHERS
                .iter()
                .find_map(|(_, rank)| var(rank).map(|r| r.to_string_lossy().trim().to_string())),
        })
}

/// A header record: kind, group hash, bytes to the receiver, sequence number.
const HDR: usize = 4;

/// Header kinds beyond [`OpKind`]'s.
const FINISHED: u64 = 100;

fn kind_code(k: OpKind) -> u64 {
    match k {
        OpKind::AllGather => 1,
        OpKind::AllReduce => 2,
        OpKind::AllToAll => 3,
        OpKind::Permute => 4,
        OpKind::Broadcast => 5,
    }
}

fn kind_name(c: u64) -> &'static str {
    match c {
        1 => "all-gather",
        2 => "all-reduce",
        3 => "all-to-all",
        4 => "permute",
        5 => "broadcast",
        FINISHED => "the end of its program",
        _ => "an unknown operation",
    }
}

/// FNV-1a of the operation's label and its group's ids: devices running the same program
/// call the same instruction at the same sequence number.
fn group_hash(label: &str, group: &[DeviceId]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let ids = group.iter().flat_map(|d| d.to_le_bytes());
    for b in label.bytes().chain([0xff]).chain(ids) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

struct Inner {
    world: SimpleCommunicator,
    seq: u64,
    /// Finalizes MPI when dropped (after the world).
    _universe: Universe,
}

/// What the watchdog watches: the collective in flight, if any.
struct Watch {
    current: Mutex<Option<(Instant, String)>>,
    stop: AtomicBool,
}

/// This process's rank of an MPI job as one device ([`Communicator`]); see the crate docs.
pub struct Mpi {
    inner: Mutex<Inner>,
    rank: DeviceId,
    size: u32,
    watch: Arc<Watch>,
}

// SAFETY: every use of the MPI handles in `Inner` goes through the mutex, so MPI is called by
// one thread at a time (what `MPI_THREAD_SERIALIZED` allows; the watchdog's `MPI_Abort` is made
// only when the library gave `MPI_THREAD_MULTIPLE`).
unsafe impl Send for Mpi {}
// SAFETY: as for `Send`.
unsafe impl Sync for Mpi {}

impl Mpi {
    /// Initializes MPI (once per process) and joins the world; collectives wait at most
    /// `timeout` before the job is aborted.
    pub fn init(timeout: Duration) -> Result<Mpi, String> {
        let (universe, threading) = mpi::initialize_with_threading(Threading::Multiple)
            .ok_or("MPI is already initialized in this process")?;
        if threading < Threading::Serialized {
            return Err(format!(
                "the MPI library offers {threading:?} threading; Axle needs serialized calls"
            ));
        }
        let world = universe.world();
        let rank = world.rank() as u32;
        let size = world.size() as u32;
        let watch = Arc::new(Watch {
            current: Mutex::new(None),
            stop: AtomicBool::new(false),
        });
        let multiple = threading == Threading::Multiple;
        let w = watch.clone();
        std::thread::Builder::new()
            .name("axle-mpi-watchdog".into())
            .spawn(move || watchdog(&w, rank, timeout, multiple))
            .map_err(|e| format!("starting the MPI watchdog: {e}"))?;
        Ok(Mpi {
            inner: Mutex::new(Inner {
                world,
                seq: 0,
                _universe: universe,
            }),
            rank,
            size,
            watch,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn invalid(&self, msg: String) -> CommError {
        CommError::Invalid {
            device: self.rank,
            msg,
        }
    }

    /// Checks `group` ([`rank_in_group`]); returns this device's index in it.
    fn rank_in(&self, group: &[DeviceId]) -> Result<usize, CommError> {
        rank_in_group(self.rank, self.size, group, "the job's {n} ranks")
    }

    /// Step 1: sends `(kind, hash, bytes[r], seq)` to every rank `r`; returns the records
    /// received, by rank.
    fn headers(&self, inner: &mut Inner, kind: u64, hash: u64, bytes: &[u64]) -> Vec<[u64; HDR]> {
        let n = self.size as usize;
        let mut send = Vec::with_capacity(n * HDR);
        for &b in bytes {
            send.extend_from_slice(&[kind, hash, b, inner.seq]);
        }
        let mut recv = vec![0u64; n * HDR];
        inner.world.all_to_all_into(&send[..], &mut recv[..]);
        recv.chunks_exact(HDR)
            .map(|c| [c[0], c[1], c[2], c[3]])
            .collect()
    }

    /// Checks the records of `group`'s members against this device's call.
    fn check(
        &self,
        seq: u64,
        what: &str,
        kind: u64,
        hash: u64,
        group: &[DeviceId],
        hdrs: &[[u64; HDR]],
    ) -> Result<(), CommError> {
        for &m in group {
            let h = hdrs[m as usize];
            if h[0] != kind || h[1] != hash || h[3] != seq {
                let theirs = if h[0] == FINISHED {
                    format!("device {m} has ended its program")
                } else if h[3] != seq {
                    format!("device {m} is at collective #{}", h[3])
                } else if h[0] != kind {
                    format!("device {m} called {}", kind_name(h[0]))
                } else {
                    format!("device {m} called another instruction or group")
                };
                return Err(CommError::Mismatch {
                    seq,
                    first: format!("device {} called {what} on group {group:?}", self.rank),
                    second: theirs,
                });
            }
        }
        Ok(())
    }

    /// Both steps of a gather or an all-to-all, inside [`Mpi::collective`]: the headers (this
    /// device sends `to[r]` bytes to rank `r`), their check against `group`'s members, and
    /// that every member sends this device as many bytes as it sends itself (else a mismatch,
    /// `sizes` saying what this device does and what another does); then `data` moves the
    /// bytes, given the world, the send counts and displacements of `to`, and the receive
    /// buffer laid out by rank. Returns what each member sent, in group order.
    fn exchange(
        &self,
        inner: &mut Inner,
        op: Op<'_>,
        group: &[DeviceId],
        to: &[u64],
        sizes: impl FnOnce() -> (String, &'static str),
        data: impl FnOnce(
            &SimpleCommunicator,
            (&[i32], &[i32]),
            &mut PartitionMut<'_, [u8], &[i32], &[i32]>,
        ),
    ) -> Result<Vec<Vec<u8>>, CommError> {
        let n = self.size as usize;
        let seq = inner.seq;
        let kind = kind_code(op.kind);
        let hash = group_hash(op.label, group);
        let hdrs = self.headers(inner, kind, hash, to);
        self.check(seq, &op.kind.to_string(), kind, hash, group, &hdrs)?;
        let expect = to[self.rank as usize];
        if group.iter().any(|&m| hdrs[m as usize][2] != expect) {
            let (first, second) = sizes();
            return Err(CommError::Mismatch {
                seq,
                first,
                second: second.into(),
            });
        }
        let from: Vec<u64> = (0..n).map(|r| hdrs[r][2]).collect();
        let (rc, rd) = counts(&from).map_err(|m| self.invalid(m))?;
        let (sc, sd) = counts(to).map_err(|m| self.invalid(m))?;
        let mut recv = vec![0u8; from.iter().sum::<u64>() as usize];
        {
            let mut part = PartitionMut::new(&mut recv[..], &rc[..], &rd[..]);
            data(&inner.world, (&sc, &sd), &mut part);
        }
        Ok(group
            .iter()
            .map(|&m| {
                let (s, l) = (rd[m as usize] as usize, rc[m as usize] as usize);
                recv[s..s + l].to_vec()
            })
            .collect())
    }

    /// Runs `f` as collective `label` under the watchdog, with the lock held.
    fn collective<T>(
        &self,
        label: &str,
        f: impl FnOnce(&mut Inner) -> Result<T, CommError>,
    ) -> Result<T, CommError> {
        let mut inner = self.lock();
        *self.watch.current.lock().unwrap_or_else(|e| e.into_inner()) = Some((
            Instant::now(),
            format!("collective #{} ({label})", inner.seq),
        ));
        let r = f(&mut inner);
        inner.seq += 1;
        *self.watch.current.lock().unwrap_or_else(|e| e.into_inner()) = None;
        r
    }
}

impl Drop for Mpi {
    fn drop(&mut self) {
        self.watch.stop.store(true, Ordering::Relaxed);
    }
}

/// Aborts the job when a collective has been in flight longer than `timeout`.
fn watchdog(w: &Watch, rank: DeviceId, timeout: Duration, multiple: bool) {
    while !w.stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        let late = w
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|(t, _)| t.elapsed() > timeout)
            .map(|(_, what)| what.clone());
        if let Some(what) = late {
            say(&format!(
                "axle: device {rank}: {what} timed out after {timeout:?} waiting for the other \
                 ranks; aborting the MPI job"
            ));
            if multiple {
                // SAFETY: the library was initialized with MPI_THREAD_MULTIPLE, so any thread
                // may call it; MPI_Abort does not return.
                unsafe { mpi::ffi::MPI_Abort(mpi::ffi::RSMPI_COMM_WORLD, 3) };
            }
            std::process::exit(3);
        }
    }
}

fn counts(bytes: &[u64]) -> Result<(Vec<i32>, Vec<i32>), String> {
    let mut c = Vec::with_capacity(bytes.len());
    let mut d = Vec::with_capacity(bytes.len());
    let mut at: i64 = 0;
    for &b in bytes {
        let b = i32::try_from(b).map_err(|_| "a buffer of 2 GiB or more for MPI".to_string())?;
        d.push(i32::try_from(at).map_err(|_| "2 GiB or more in one MPI call".to_string())?);
        c.push(b);
        at += i64::from(b);
    }
    Ok((c, d))
}

impl Communicator for Mpi {
    fn device(&self) -> DeviceId {
        self.rank
    }

    fn num_devices(&self) -> u32 {
        self.size
    }

    fn all_gather(
        &self,
        op: Op<'_>,
        group: &[DeviceId],
        data: &[u8],
    ) -> Result<Vec<Vec<u8>>, CommError> {
        self.rank_in(group)?;
        let n = self.size as usize;
        self.collective(op.label, |inner| {
            let mut to = vec![0u64; n];
            for &m in group {
                to[m as usize] = data.len() as u64;
            }
            let sizes = || {
                (
                    format!("device {} gathers {} bytes", self.rank, data.len()),
                    "another member gathers another size",
                )
            };
            self.exchange(inner, op, group, &to, sizes, |world, (sc, sd), recv| {
                if group.len() == n {
                    world.all_gather_varcount_into(data, recv);
                } else {
                    // One copy per member (the displacements place them in rank order).
                    let ordered = data.repeat(group.len());
                    let send = Partition::new(&ordered[..], sc, sd);
                    world.all_to_all_varcount_into(&send, recv);
                }
            })
        })
    }

    fn all_to_all(
        &self,
        op: Op<'_>,
        group: &[DeviceId],
        chunks: &[&[u8]],
    ) -> Result<Vec<Vec<u8>>, CommError> {
        let me = self.rank_in(group)?;
        if chunks.len() != group.len() {
            return Err(self.invalid(format!(
                "{} chunks for a group of {}",
                chunks.len(),
                group.len()
            )));
        }
        let n = self.size as usize;
        self.collective(op.label, |inner| {
            let mut to = vec![0u64; n];
            let mut chunk_of = vec![None; n];
            for (k, &m) in group.iter().enumerate() {
                to[m as usize] = chunks[k].len() as u64;
                chunk_of[m as usize] = Some(k);
            }
            let mut send = Vec::with_capacity(to.iter().sum::<u64>() as usize);
            for &k in chunk_of.iter().flatten() {
                send.extend_from_slice(chunks[k]);
            }
            // Chunk `me` of every member comes here: its size must be this device's chunk
            // `me`'s (equal chunks, as the in-process transport checks).
            let sizes = || {
                (
                    format!(
                        "device {} exchanges chunks of {} bytes",
                        self.rank,
                        chunks[me].len()
                    ),
                    "another member sends chunks of another size",
                )
            };
            self.exchange(inner, op, group, &to, sizes, |world, (sc, sd), recv| {
                world.all_to_all_varcount_into(&Partition::new(&send[..], sc, sd), recv);
            })
        })
    }

    fn permute(
        &self,
        op: Op<'_>,
        to: &[DeviceId],
        from: Option<DeviceId>,
        data: &[u8],
    ) -> Result<Option<Vec<u8>>, CommError> {
        let n = self.size as usize;
        if let Some(&bad) = to.iter().chain(from.iter()).find(|&&d| d as usize >= n) {
            return Err(self.invalid(format!("permute peer {bad} is outside the job's {n} ranks")));
        }
        let kind = kind_code(op.kind);
        self.collective(op.label, |inner| {
            let seq = inner.seq;
            let mut bytes = vec![0u64; n];
            for &t in to {
                bytes[t as usize] = data.len() as u64;
            }
            let hash = group_hash(op.label, &[]);
            let hdrs = self.headers(inner, kind, hash, &bytes);
            // Every device takes part in every permute.
            let all: Vec<DeviceId> = (0..self.size).collect();
            self.check(seq, "permute", kind, hash, &all, &hdrs)?;
            let expect = from.map(|s| hdrs[s as usize][2]);
            if let Some(s) = from {
                if hdrs[s as usize][2] == 0 && !data.is_empty() {
                    return Err(CommError::Mismatch {
                        seq,
                        first: format!("device {} expects a value from device {s}", self.rank),
                        second: format!("device {s} sends it nothing"),
                    });
                }
            }
            let tag = (seq % 32_000) as i32;
            let world = &inner.world;
            let got = mpi::request::scope(|scope| {
                let sends: Vec<_> = to
                    .iter()
                    .map(|&t| {
                        world
                            .process_at_rank(t as i32)
                            .immediate_send_with_tag(scope, data, tag)
                    })
                    .collect();
                let got = from.map(|s| {
                    let mut buf = vec![0u8; expect.unwrap_or(0) as usize];
                    world
                        .process_at_rank(s as i32)
                        .receive_into_with_tag(&mut buf[..], tag);
                    buf
                });
                for r in sends {
                    r.wait();
                }
                got
            });
            Ok(got)
        })
    }

    fn abort(&self, reason: &str) {
        say(&format!(
            "axle: device {}: {reason}; aborting the MPI job",
            self.rank
        ));
        let inner = self.lock();
        inner.world.abort(2);
    }

    fn finish(&self) {
        let mut inner = self.lock();
        let n = self.size as usize;
        let hdrs = self.headers(&mut inner, FINISHED, 0, &vec![0; n]);
        if let Some((r, h)) = hdrs.iter().enumerate().find(|(_, h)| h[0] != FINISHED) {
            let msg = format!(
                "the programs differ: device {} ended its program after {} collectives, \
                 device {r} called {} as collective #{}",
                self.rank,
                inner.seq,
                kind_name(h[0]),
                h[3]
            );
            drop(inner);
            self.abort(&msg);
        }
    }
}

/// Writes `msg` and a newline to standard error in one write, so the launcher's own messages
/// (Open MPI's abort banner) cannot land inside it.
fn say(msg: &str) {
    use std::io::Write;
    let line = format!("{msg}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
