//! The thread pools parallel kernels run on: one per thread count, shared by every executable
//! and every caller in the process.
//!
//! Invariants:
//! - A pool runs one caller's kernel at a time. A caller whose kernel finds the pool busy with
//!   another caller's runs it on its own thread instead of queueing behind it, so concurrent
//!   callers use their own threads (each as fast as single-threaded) rather than slowing each
//!   other down on a shared queue, and the machine is never oversubscribed by waiting callers.
//! - Splitting never changes a result: every output element is computed by exactly one range,
//!   with the same code whichever thread runs it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rayon::prelude::*;

/// A thread pool with the flag that keeps it to one caller at a time.
pub(crate) struct SharedPool {
    threads: rayon::ThreadPool,
    busy: AtomicBool,
}

impl SharedPool {
    /// The process's pool of `threads` threads (made on first use).
    pub(crate) fn get(threads: usize) -> Option<Arc<SharedPool>> {
        type Pools = Mutex<Vec<(usize, Arc<SharedPool>)>>;
        static POOLS: OnceLock<Pools> = OnceLock::new();
        let pools = POOLS.get_or_init(|| Mutex::new(Vec::new()));
        let mut v = pools.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, p)) = v.iter().find(|(n, _)| *n == threads) {
            return Some(p.clone());
        }
        let p = Arc::new(SharedPool {
            threads: rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("axle-cpu-{i}"))
                .build()
                .ok()?,
            busy: AtomicBool::new(false),
        });
        v.push((threads, p.clone()));
        Some(p)
    }

    /// The number of threads.
    pub(crate) fn threads(&self) -> usize {
        self.threads.current_num_threads()
    }

    /// Runs `run(s, e)` over a partition of `[0, n)` into at most four ranges per thread, each
    /// of at least `grain` items, on the pool; or over the whole range on the calling thread
    /// when the pool is running another caller's kernel.
    pub(crate) fn for_ranges(&self, n: i64, grain: i64, run: impl Fn(i64, i64) + Sync) {
        if self
            .busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            run(0, n);
            return;
        }
        /// Frees the pool when the parallel section ends, also by unwinding.
        struct Release<'a>(&'a AtomicBool);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _release = Release(&self.busy);
        let threads = self.threads() as i64;
        let chunks = (n / grain.max(1)).clamp(1, threads * 4);
        let (per, rem) = (n / chunks, n % chunks);
        self.threads.install(|| {
            (0..chunks).into_par_iter().for_each(|c| {
                let s = c * per + c.min(rem);
                run(s, s + per + (c < rem) as i64);
            })
        });
    }
}
