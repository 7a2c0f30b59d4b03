//! The simulator's threads: a kernel's grid run on the host following its launch plan, and the
//! host functions that stand for the GPU's special registers, block barrier, warp shuffle and
//! warp-level tensor-core `mma` in the simulator's code ([`crate::sim_jit`]).
//!
//! Blocks run one after another (the shared arrays are one copy per module). A kernel that
//! synchronizes (a reduction, transpose, dot or sort tile kernel: barriers and shuffles) runs
//! each block's threads as OS threads of a pool that is kept between launches: every thread of
//! a block is a worker, `bar.sync` is a [`Barrier`] of the block's threads and a butterfly
//! shuffle goes through the warp's exchange slots between two waits on the warp's barrier, and
//! an `mma` through the warp's fragment slots (two rounds used in turn) with one wait on it,
//! each lane then computing its own part of the result from every lane's fragments
//! (`crate::sim_mma`). A loop kernel (one element per thread, no barrier, no shuffle) and a
//! sort's global step run their threads one after another on the calling thread, which gives
//! the same result: their threads share no data. An atomic scatter update (`crate::scatter`), whose threads do share
//! output elements, runs as OS threads too, so its atomics meet real races.
//!
//! Invariants: one launch at a time in the process (a lock), so the hooks' state is the
//! running launch's; thread and block indices are thread-local to the worker running the GPU
//! thread; the hooks never panic or block forever on a misuse they can see: a barrier or
//! shuffle reached in a launch run without threads, a shuffle with a partial mask (which
//! the simulator does not model), an `mma` in a partial warp, and a barrier (or shuffle, or
//! `mma`) that some of its threads wait at while others of them have returned from the kernel
//! (which hangs or is undefined on a GPU) record an error the launch returns, and release the
//! waiting threads.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use crate::launch::{LaunchPlan, WARP};
use crate::sim_mma::{lane_result, Fragments, MmaElem, LANES};

/// A kernel's entry point in the simulator: the table of its buffer pointers.
pub(crate) type EntryFn = unsafe extern "C" fn(*const *mut u8);

/// The state of a [`SimBarrier`].
#[derive(Default)]
struct BarrierState {
    /// Threads waiting in the current round.
    arrived: usize,
    /// Threads that returned from the kernel.
    exited: usize,
    /// Completed rounds.
    round: u64,
    /// Set once some threads waited while others had returned: every wait returns at once.
    broken: bool,
}

/// A barrier of `parties` threads that knows which of them returned from the kernel: a round
/// that the remaining threads complete while some returned is a misuse, recorded as the
/// launch's error, and releases every waiter instead of blocking forever.
struct SimBarrier {
    parties: usize,
    what: &'static str,
    state: Mutex<BarrierState>,
    cv: Condvar,
}

impl SimBarrier {
    fn new(parties: usize, what: &'static str) -> SimBarrier {
        SimBarrier {
            parties,
            what,
            state: Mutex::new(BarrierState::default()),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BarrierState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Breaks the barrier when every thread has either arrived or returned, some returned and
    /// some wait.
    fn check_stuck(&self, st: &mut BarrierState) {
        if st.arrived > 0 && st.exited > 0 && st.arrived + st.exited == self.parties {
            st.broken = true;
            record(&format!(
                "{}: {} of its {} threads wait while {} returned from the kernel",
                self.what, st.arrived, self.parties, st.exited
            ));
            self.cv.notify_all();
        }
    }

    /// Waits until every thread of the barrier arrives (or the barrier is broken).
    fn wait(&self) {
        let mut st = self.lock();
        if st.broken {
            return;
        }
        st.arrived += 1;
        if st.arrived == self.parties {
            st.arrived = 0;
            st.round += 1;
            self.cv.notify_all();
            return;
        }
        self.check_stuck(&mut st);
        let round = st.round;
        while st.round == round && !st.broken {
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Records that one thread returned from the kernel.
    fn exit(&self) {
        let mut st = self.lock();
        st.exited += 1;
        self.check_stuck(&mut st);
    }
}

/// The fragments of a warp's `mma`s, exchanged between its lanes: two rounds of slots used in
/// turn, so a lane writing the next `mma`'s fragments never overwrites ones another lane has
/// yet to read (it writes round `r + 2`'s slots only after every lane passed round `r + 1`'s
/// barrier, so after every lane read round `r`).
struct MmaExchange {
    slots: Mutex<[[Fragments; LANES]; 2]>,
    /// Per lane, the `mma`s it has run.
    rounds: [AtomicU32; LANES],
}

/// The synchronization of one block.
struct BlockSync {
    /// `bar.sync 0`: every thread of the block.
    barrier: SimBarrier,
    /// Per warp: its barrier and its 32 exchange slots.
    warps: Vec<(SimBarrier, [AtomicU32; WARP as usize])>,
    /// Per warp: its `mma` exchange.
    mma: Vec<MmaExchange>,
}

impl BlockSync {
    fn new(threads: usize) -> BlockSync {
        let warps = threads.div_ceil(WARP as usize);
        BlockSync {
            barrier: SimBarrier::new(threads, "a block barrier"),
            warps: (0..warps)
                .map(|w| {
                    (
                        SimBarrier::new(
                            (threads - w * WARP as usize).min(WARP as usize),
                            "a warp shuffle",
                        ),
                        std::array::from_fn(|_| AtomicU32::new(0)),
                    )
                })
                .collect(),
            mma: (0..warps)
                .map(|_| MmaExchange {
                    slots: Mutex::new([[Fragments::default(); LANES]; 2]),
                    rounds: std::array::from_fn(|_| AtomicU32::new(0)),
                })
                .collect(),
        }
    }

    /// Records that GPU thread `tid` of the block returned from the kernel.
    fn exit(&self, tid: u32) {
        self.barrier.exit();
        if let Some((w, _)) = self.warps.get((tid / WARP as u32) as usize) {
            w.exit();
        }
    }
}

thread_local! {
    /// (thread index, block index, block size) of the GPU thread this OS thread runs.
    static IDS: Cell<(u32, u32, u32)> = const { Cell::new((0, 0, 0)) };
    /// The running block's synchronization, when the launch runs threads; null otherwise.
    static SYNC: Cell<*const BlockSync> = const { Cell::new(std::ptr::null()) };
}

/// The first misuse a hook saw in the running launch.
static HOOK_ERROR: Mutex<Option<String>> = Mutex::new(None);

fn record(msg: &str) {
    let mut e = HOOK_ERROR.lock().unwrap_or_else(|e| e.into_inner());
    if e.is_none() {
        *e = Some(msg.to_string());
    }
}

/// `%tid.x`.
pub(crate) extern "C" fn hook_tid() -> u32 {
    IDS.with(|c| c.get().0)
}

/// `%ctaid.x`.
pub(crate) extern "C" fn hook_ctaid() -> u32 {
    IDS.with(|c| c.get().1)
}

/// `%ntid.x`.
pub(crate) extern "C" fn hook_ntid() -> u32 {
    IDS.with(|c| c.get().2)
}

/// `bar.sync 0`.
pub(crate) extern "C" fn hook_barrier() {
    let s = SYNC.with(|c| c.get());
    if s.is_null() {
        record("a barrier in a kernel launched without threads");
        return;
    }
    // SAFETY: the block's synchronization outlives every thread of the block.
    unsafe { &*s }.barrier.wait();
}

/// `shfl.sync.bfly.b32 r, x, lane_mask, clamp, member_mask`: `x` of lane `lane ^ lane_mask`.
pub(crate) extern "C" fn hook_shfl_bfly(
    member_mask: u32,
    x: u32,
    lane_mask: u32,
    clamp: u32,
) -> u32 {
    let s = SYNC.with(|c| c.get());
    if s.is_null() {
        record("a warp shuffle in a kernel launched without threads");
        return x;
    }
    if member_mask != u32::MAX || clamp != 0x1f {
        record("a warp shuffle with a partial mask or clamp (not simulated)");
        return x;
    }
    // SAFETY: as in `hook_barrier`.
    let sync = unsafe { &*s };
    let tid = hook_tid();
    let lane = tid % WARP as u32;
    let Some((barrier, slots)) = sync.warps.get((tid / WARP as u32) as usize) else {
        record("a warp shuffle by a thread outside the block");
        return x;
    };
    slots[lane as usize].store(x, Ordering::Relaxed);
    barrier.wait();
    let v = slots[((lane ^ lane_mask) % WARP as u32) as usize].load(Ordering::Relaxed);
    // No lane overwrites its slot (at the next shuffle) before every lane has read.
    barrier.wait();
    v
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.T.T.f32` (`T` `f16` for `kind` 0, `bf16` for 1): this
/// lane's A registers `a0..a3`, B registers `b0, b1` and C elements `c0..c3` in, its D elements
/// out at `d` (four `f32`), computed from every lane's fragments (`crate::sim_mma`). Every lane
/// of a full warp must reach it, as `.aligned` requires on a GPU.
#[allow(clippy::too_many_arguments)]
pub(crate) extern "C" fn hook_mma(
    kind: u32,
    a0: u32,
    a1: u32,
    a2: u32,
    a3: u32,
    b0: u32,
    b1: u32,
    c0: f32,
    c1: f32,
    c2: f32,
    c3: f32,
    d: *mut f32,
) {
    let mine = Fragments {
        a: [a0, a1, a2, a3],
        b: [b0, b1],
        c: [c0, c1, c2, c3],
    };
    let out = mma_collective(kind, mine).unwrap_or_else(|e| {
        record(e);
        mine.c
    });
    // SAFETY: the caller passes room for four `f32`.
    unsafe { std::ptr::copy_nonoverlapping(out.as_ptr(), d, 4) };
}

/// This lane's D of a warp's `mma`, or the misuse that prevents it.
fn mma_collective(kind: u32, mine: Fragments) -> Result<[f32; 4], &'static str> {
    let elem = MmaElem::from_kind(kind).ok_or("an mma of an unknown operand type")?;
    let s = SYNC.with(|c| c.get());
    if s.is_null() {
        return Err("an mma in a kernel launched without threads");
    }
    // SAFETY: as in `hook_barrier`.
    let sync = unsafe { &*s };
    let tid = hook_tid();
    let (w, lane) = ((tid / WARP as u32) as usize, (tid % WARP as u32) as usize);
    let (Some((barrier, _)), Some(ex)) = (sync.warps.get(w), sync.mma.get(w)) else {
        return Err("an mma by a thread outside the block");
    };
    if barrier.parties != LANES {
        return Err("an mma in a partial warp (mma.sync.aligned needs all 32 lanes)");
    }
    let round = (ex.rounds[lane].fetch_add(1, Ordering::Relaxed) % 2) as usize;
    ex.slots.lock().unwrap_or_else(|e| e.into_inner())[round][lane] = mine;
    barrier.wait();
    let frags = ex.slots.lock().unwrap_or_else(|e| e.into_inner())[round];
    Ok(lane_result(elem, &frags, lane))
}

/// A table of buffer pointers sent to worker threads.
#[derive(Clone, Copy)]
struct Table(*const *mut u8);
// SAFETY: the table and the buffers it points to outlive the launch; the kernel's threads
// write disjoint elements or synchronize through the hooks.
unsafe impl Send for Table {}

/// What a worker runs: one GPU thread.
struct Job {
    entry: EntryFn,
    table: Table,
    ids: (u32, u32, u32),
    sync: Arc<BlockSync>,
}

/// Workers, one per thread of the largest block run so far.
struct Pool {
    workers: Vec<Sender<Job>>,
    done_tx: Sender<()>,
    done_rx: Receiver<()>,
}

impl Pool {
    fn grow(&mut self, n: usize) -> Result<(), String> {
        while self.workers.len() < n {
            let (tx, rx) = channel::<Job>();
            let done = self.done_tx.clone();
            std::thread::Builder::new()
                .name(format!("nvptx-sim-{}", self.workers.len()))
                .stack_size(4 << 20)
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        IDS.with(|c| c.set(job.ids));
                        SYNC.with(|c| c.set(Arc::as_ptr(&job.sync)));
                        // SAFETY: the entry point takes the table of the kernel's buffers.
                        unsafe { (job.entry)(job.table.0) };
                        job.sync.exit(job.ids.0);
                        SYNC.with(|c| c.set(std::ptr::null()));
                        drop(job);
                        if done.send(()).is_err() {
                            return;
                        }
                    }
                })
                .map_err(|e| format!("cannot start a simulator thread: {e}"))?;
            self.workers.push(tx);
        }
        Ok(())
    }
}

fn pool() -> &'static Mutex<Pool> {
    static POOL: OnceLock<Mutex<Pool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let (done_tx, done_rx) = channel();
        Mutex::new(Pool {
            workers: Vec::new(),
            done_tx,
            done_rx,
        })
    })
}

/// Runs `entry` on the buffers of `table` over the grid of `plan`; with `threads`, each
/// block's threads run concurrently (a kernel with barriers or shuffles), else one after
/// another on this thread.
pub(crate) fn run_grid(
    entry: EntryFn,
    table: &[*mut u8],
    plan: &LaunchPlan,
    threads: bool,
) -> Result<(), String> {
    let mut pool = pool().lock().unwrap_or_else(|e| e.into_inner());
    *HOOK_ERROR.lock().unwrap_or_else(|e| e.into_inner()) = None;
    let (grid, block) = (plan.grid as u32, plan.block as u32);
    let t = Table(table.as_ptr());
    if !threads {
        let saved = IDS.with(|c| c.get());
        for b in 0..grid {
            for th in 0..block {
                IDS.with(|c| c.set((th, b, block)));
                // SAFETY: as in the workers.
                unsafe { entry(t.0) };
            }
        }
        IDS.with(|c| c.set(saved));
    } else {
        pool.grow(block as usize)?;
        for b in 0..grid {
            let sync = Arc::new(BlockSync::new(block as usize));
            for th in 0..block {
                let job = Job {
                    entry,
                    table: t,
                    ids: (th, b, block),
                    sync: sync.clone(),
                };
                pool.workers[th as usize]
                    .send(job)
                    .map_err(|_| "a simulator thread is gone".to_string())?;
            }
            for _ in 0..block {
                pool.done_rx
                    .recv()
                    .map_err(|_| "a simulator thread is gone".to_string())?;
            }
        }
    }
    match HOOK_ERROR.lock().unwrap_or_else(|e| e.into_inner()).take() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GPU thread: `out[gid] = shfl_bfly(tid * 3, 5) + 1000 * ntid`, where `gid` is the
    /// global thread index.
    unsafe extern "C" fn shuffle_kernel(table: *const *mut u8) {
        // SAFETY: `run_grid` passes the test's table, whose first entry points at `out`.
        let out = unsafe { *table } as *mut u32;
        let (t, b, n) = (hook_tid(), hook_ctaid(), hook_ntid());
        let v = hook_shfl_bfly(u32::MAX, t * 3, 5, 0x1f);
        // SAFETY: `out` holds `grid * block` u32s (2 x 64) and `b * n + t` is below that.
        unsafe { *out.add((b * n + t) as usize) = v + 1000 * n };
    }

    /// Each thread stores its index into shared `slots`, waits at the barrier, then reads its
    /// mirror's: correct only if every store happened before any read.
    unsafe extern "C" fn barrier_kernel(table: *const *mut u8) {
        // SAFETY: the test's table has two entries, `slots` then `out`.
        let slots = unsafe { *table } as *mut u32;
        // SAFETY: as above, entry 1 is `out`.
        let out = unsafe { *table.add(1) } as *mut u32;
        let (t, b, n) = (hook_tid(), hook_ctaid(), hook_ntid());
        // SAFETY: `slots` holds `block` u32s and `t < n = block`; volatile, as other threads
        // read it after the barrier.
        unsafe { slots.add(t as usize).write_volatile(b * 10_000 + t) };
        hook_barrier();
        // SAFETY: `n - 1 - t < block`, within `slots`; its store happened before the barrier.
        let mirror = unsafe { slots.add((n - 1 - t) as usize).read_volatile() };
        hook_barrier();
        // SAFETY: `out` holds `grid * block` u32s and `b * n + t` is below that.
        unsafe { *out.add((b * n + t) as usize) = mirror };
    }

    /// Threads past the first warp return before the barrier the first warp waits at.
    unsafe extern "C" fn early_return_kernel(table: *const *mut u8) {
        // SAFETY: the test's table has one entry, `out`.
        let out = unsafe { *table } as *mut u32;
        let t = hook_tid();
        if t >= 32 {
            return;
        }
        hook_barrier();
        // SAFETY: `t < 32` here and `out` holds 64 u32s.
        unsafe { *out.add(t as usize) = 1 };
    }

    fn plan(grid: u64, block: u64) -> LaunchPlan {
        LaunchPlan::for_blocks(grid * block, grid, block).unwrap()
    }

    #[test]
    fn butterfly_shuffles_read_the_lane_with_the_mask_bits_flipped() {
        let mut out = vec![0u32; 2 * 64];
        let table = [out.as_mut_ptr().cast::<u8>()];
        run_grid(shuffle_kernel, &table, &plan(2, 64), true).unwrap();
        for (g, &v) in out.iter().enumerate() {
            let t = (g % 64) as u32;
            let lane = t % 32;
            let src = (t - lane) + (lane ^ 5);
            assert_eq!(v, src * 3 + 64_000, "thread {g}");
        }
    }

    #[test]
    fn barriers_order_every_store_of_a_block_before_its_reads() {
        let block = 256u64;
        let mut slots = vec![0u32; block as usize];
        let mut out = vec![0u32; 3 * block as usize];
        let table = [
            slots.as_mut_ptr().cast::<u8>(),
            out.as_mut_ptr().cast::<u8>(),
        ];
        run_grid(barrier_kernel, &table, &plan(3, block), true).unwrap();
        for (g, &v) in out.iter().enumerate() {
            let (b, t) = ((g as u64 / block) as u32, (g as u64 % block) as u32);
            assert_eq!(v, b * 10_000 + (block as u32 - 1 - t), "thread {g}");
        }
    }

    #[test]
    fn a_barrier_some_threads_skip_is_an_error_not_a_hang() {
        let mut out = vec![0u32; 64];
        let table = [out.as_mut_ptr().cast::<u8>()];
        let e = run_grid(early_return_kernel, &table, &plan(2, 64), true).unwrap_err();
        assert!(e.contains("returned from the kernel"), "{e}");
        // The next launch starts clean.
        run_grid(barrier_kernel_table_check, &table, &plan(1, 32), true).unwrap();
    }

    /// Every thread waits at one barrier, then writes its index.
    unsafe extern "C" fn barrier_kernel_table_check(table: *const *mut u8) {
        // SAFETY: the test's table has one entry, `out`.
        let out = unsafe { *table } as *mut u32;
        let t = hook_tid();
        hook_barrier();
        // SAFETY: launched with one block of 32 threads, so `t < 32`, and `out` holds 64 u32s.
        unsafe { *out.add(t as usize) = t };
    }

    /// Lane `l` of every warp holds the fragments of `A[r][k] = r - k`, `B[k][c] = k + c`,
    /// `C[r][c] = r * c` (small integers, exact in f16) by the PTX ISA's layout, runs two
    /// `mma`s (the second accumulating onto the first's result) and stores its four `D`
    /// elements at their (row, column) of `out` (per warp, 16 x 8).
    unsafe extern "C" fn mma_kernel(table: *const *mut u8) {
        // SAFETY: the test's table has one entry, `out`, of `4 * 128` f32s.
        let out = unsafe { *table } as *mut f32;
        let tid = hook_tid() + hook_ctaid() * hook_ntid();
        let (w, lane) = (tid / 32, tid % 32);
        let (group, quad) = (lane / 4, lane % 4);
        let h = |v: i32| half::f16::from_f32(v as f32).to_bits() as u32;
        let pack = |lo: i32, hi: i32| h(lo) | (h(hi) << 16);
        let (g, q) = (group as i32, quad as i32 * 2);
        let a = [
            pack(g - q, g - q - 1),
            pack(g + 8 - q, g + 8 - q - 1),
            pack(g - q - 8, g - q - 9),
            pack(g - q, g - q - 1),
        ];
        let b = [pack(q + g, q + 1 + g), pack(q + 8 + g, q + 9 + g)];
        let c = [g * q, g * (q + 1), (g + 8) * q, (g + 8) * (q + 1)].map(|v| v as f32);
        let mut d = [0f32; 4];
        hook_mma(
            0,
            a[0],
            a[1],
            a[2],
            a[3],
            b[0],
            b[1],
            c[0],
            c[1],
            c[2],
            c[3],
            d.as_mut_ptr(),
        );
        let c2 = d;
        hook_mma(
            0,
            a[0],
            a[1],
            a[2],
            a[3],
            b[0],
            b[1],
            c2[0],
            c2[1],
            c2[2],
            c2[3],
            d.as_mut_ptr(),
        );
        for (i, v) in d.iter().enumerate() {
            let (r, col) = (group as usize + 8 * (i / 2), quad as usize * 2 + i % 2);
            // SAFETY: `w < 4` (2 blocks of 64 threads), `r < 16` and `col < 8`, so the index is
            // below `4 * 128`, the length of `out`.
            unsafe { *out.add(w as usize * 128 + r * 8 + col) = *v };
        }
    }

    #[test]
    fn a_warp_mma_is_a_times_b_plus_c_over_the_isa_fragment_layout() {
        // 2 blocks of 64 threads: 4 warps.
        let mut out = vec![f32::NAN; 4 * 128];
        let table = [out.as_mut_ptr().cast::<u8>()];
        run_grid(mma_kernel, &table, &plan(2, 64), true).unwrap();
        for w in 0..4 {
            for r in 0..16i32 {
                for c in 0..8i32 {
                    let ab: i32 = (0..16).map(|k| (r - k) * (k + c)).sum();
                    let want = (r * c + 2 * ab) as f32;
                    assert_eq!(
                        out[w * 128 + (r * 8 + c) as usize],
                        want,
                        "warp {w} ({r}, {c})"
                    );
                }
            }
        }
        // A partial warp (48 threads: the second warp has 16 lanes) is an error.
        let partial = LaunchPlan {
            elements: 48,
            grid: 1,
            block: 48,
            wide_index: false,
        };
        let e = run_grid(mma_kernel, &table, &partial, true).unwrap_err();
        assert!(e.contains("partial warp"), "{e}");
    }

    #[test]
    fn synchronizing_in_a_launch_without_threads_is_an_error() {
        let mut out = vec![0u32; 32];
        let table = [out.as_mut_ptr().cast::<u8>()];
        let e = run_grid(shuffle_kernel, &table, &plan(1, 32), false).unwrap_err();
        assert!(e.contains("without threads"), "{e}");
        // The next launch starts clean.
        run_grid(shuffle_kernel, &table, &plan(1, 32), true).unwrap();
    }
}
