//! The thread pools parallel kernels run on: one per thread count, shared by every executable
//! and every caller in the process.
//!
//! A pool of `n` threads is the calling thread and `n - 1` workers. A parallel kernel call
//! publishes its ranges; the caller and every worker that is awake claim ranges one at a time
//! until none is left, and the call returns when every range has run. The caller starts on the
//! ranges at once, so a kernel never waits for a worker to wake: a worker that is asleep when
//! the call starts joins when it wakes, or not at all. Workers stay awake (spinning) for
//! [`SPIN`] after a call, so the back-to-back kernels of a program find them awake; only then
//! do they sleep.
//!
//! Invariants:
//! - A pool runs one caller's kernel at a time. A caller whose kernel finds the pool busy with
//!   another caller's runs it on its own thread instead of queueing behind it, so concurrent
//!   callers use their own threads (each as fast as single-threaded) rather than slowing each
//!   other down on a shared queue, and the machine is never oversubscribed by waiting callers.
//! - Splitting never changes a result: every output element is computed by exactly one range,
//!   the ranges depend only on `n`, `grain` and the thread count, and each runs the same code
//!   whichever thread claims it.
//! - A call's ranges (and the closure they run) live on the caller's stack: the call returns
//!   only after every range has finished and no worker can still reach the call.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a worker keeps looking for the next call before it sleeps.
const SPIN: Duration = Duration::from_micros(500);

/// A thread pool with the flag that keeps it to one caller at a time.
pub(crate) struct SharedPool {
    shared: Arc<Shared>,
    threads: usize,
    busy: AtomicBool,
}

/// What the caller and the workers share.
struct Shared {
    /// The call in progress ([`Call`] on the caller's stack), or null.
    call: AtomicPtr<()>,
    /// Bumped for every published call; workers wait for it to move.
    epoch: AtomicU64,
    /// Workers between reading `call` and being done with it.
    active: AtomicUsize,
    /// Workers asleep (or about to be) on `wake`.
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
}

/// One parallel call: `chunks` ranges handed out in order.
struct Call<'a> {
    run: &'a (dyn Fn(i64) + Sync),
    chunks: i64,
    next: AtomicI64,
    done: AtomicI64,
}

impl Call<'_> {
    /// Claims and runs ranges until none is left.
    fn work(&self) {
        loop {
            let c = self.next.fetch_add(1, Ordering::Relaxed);
            if c >= self.chunks {
                return;
            }
            (self.run)(c);
            self.done.fetch_add(1, Ordering::Release);
        }
    }
}

impl SharedPool {
    /// The process's pool of `threads` threads (made on first use), or `None` when its worker
    /// threads cannot be started.
    pub(crate) fn get(threads: usize) -> Option<Arc<SharedPool>> {
        type Pools = Mutex<Vec<(usize, Arc<SharedPool>)>>;
        static POOLS: OnceLock<Pools> = OnceLock::new();
        let pools = POOLS.get_or_init(|| Mutex::new(Vec::new()));
        let mut v = pools.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, p)) = v.iter().find(|(n, _)| *n == threads) {
            return Some(p.clone());
        }
        let shared = Arc::new(Shared {
            call: AtomicPtr::new(std::ptr::null_mut()),
            epoch: AtomicU64::new(0),
            active: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        });
        for i in 1..threads {
            let s = shared.clone();
            std::thread::Builder::new()
                .name(format!("axle-cpu-{i}"))
                .spawn(move || worker(&s))
                .ok()?;
        }
        let p = Arc::new(SharedPool {
            shared,
            threads,
            busy: AtomicBool::new(false),
        });
        v.push((threads, p.clone()));
        Some(p)
    }

    /// The number of threads (the caller's included).
    pub(crate) fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `run(s, e)` over a partition of `[0, n)` into at most four ranges per thread, each
    /// of at least `grain` items, on the caller and the pool's workers; or over the whole range
    /// on the calling thread when the pool is running another caller's kernel.
    pub(crate) fn for_ranges(&self, n: i64, grain: i64, run: impl Fn(i64, i64) + Sync) {
        let threads = self.threads as i64;
        let chunks = (n / grain.max(1)).clamp(1, threads * 4);
        if chunks == 1
            || self
                .busy
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            run(0, n);
            return;
        }
        /// Frees the pool when the parallel section ends.
        struct Release<'a>(&'a AtomicBool);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _release = Release(&self.busy);
        let (per, rem) = (n / chunks, n % chunks);
        let range = move |c: i64| {
            let s = c * per + c.min(rem);
            run(s, s + per + (c < rem) as i64);
        };
        let call = Call {
            run: &range,
            chunks,
            next: AtomicI64::new(0),
            done: AtomicI64::new(0),
        };
        let s = &*self.shared;
        s.call
            .store(&call as *const Call as *mut (), Ordering::SeqCst);
        s.epoch.fetch_add(1, Ordering::SeqCst);
        if s.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        call.work();
        let mut spins = 0u32;
        while call.done.load(Ordering::Acquire) < chunks {
            pause(&mut spins);
        }
        // No worker may reach `call` after this function returns.
        s.call.store(std::ptr::null_mut(), Ordering::SeqCst);
        while s.active.load(Ordering::SeqCst) != 0 {
            pause(&mut spins);
        }
    }
}

/// Waits a little: spins first, then yields the processor (a worker holding the last range
/// may have been descheduled).
fn pause(spins: &mut u32) {
    *spins += 1;
    if *spins < 1 << 12 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// A worker: waits for a call (spinning for [`SPIN`], then asleep) and helps with its ranges.
fn worker(s: &Shared) {
    let mut seen = s.epoch.load(Ordering::SeqCst);
    loop {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let e = s.epoch.load(Ordering::Acquire);
            if e != seen {
                seen = e;
                break;
            }
            std::hint::spin_loop();
            spins += 1;
            if spins & 63 == 0 && start.elapsed() > SPIN {
                let mut g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
                s.sleepers.fetch_add(1, Ordering::SeqCst);
                while s.epoch.load(Ordering::SeqCst) == seen {
                    g = s.wake.wait(g).unwrap_or_else(|e| e.into_inner());
                }
                s.sleepers.fetch_sub(1, Ordering::SeqCst);
                drop(g);
                seen = s.epoch.load(Ordering::Acquire);
                break;
            }
        }
        s.active.fetch_add(1, Ordering::SeqCst);
        let p = s.call.load(Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: the caller clears `call` and then waits for `active` to reach zero
            // before its `Call` goes out of scope; this worker counted itself in `active`
            // before reading the pointer, so the call is alive until the decrement below.
            let call = unsafe { &*(p as *const Call) };
            call.work();
        }
        s.active.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::SharedPool;
    use std::sync::atomic::{AtomicI64, Ordering};

    #[test]
    fn every_item_runs_exactly_once_at_any_split() {
        let pool = SharedPool::get(3).expect("pool");
        for (n, grain) in [(1, 1), (7, 1), (100, 3), (1000, 1), (12, 5), (5, 100)] {
            let hits: Vec<AtomicI64> = (0..n).map(|_| AtomicI64::new(0)).collect();
            pool.for_ranges(n, grain, |s, e| {
                for h in &hits[s as usize..e as usize] {
                    h.fetch_add(1, Ordering::Relaxed);
                }
            });
            assert!(
                hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                "n {n} grain {grain}"
            );
        }
    }

    #[test]
    fn concurrent_callers_all_finish() {
        let pool = SharedPool::get(2).expect("pool");
        std::thread::scope(|sc| {
            for t in 0..4 {
                let pool = &pool;
                sc.spawn(move || {
                    for i in 0..200 {
                        let sum = AtomicI64::new(0);
                        let n = 50 + (t * 7 + i) % 90;
                        pool.for_ranges(n, 4, |s, e| {
                            sum.fetch_add((s..e).sum::<i64>(), Ordering::Relaxed);
                        });
                        assert_eq!(sum.load(Ordering::Relaxed), n * (n - 1) / 2);
                    }
                });
            }
        });
    }
}
