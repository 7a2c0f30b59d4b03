//! The precompiled GEMM: a dot's work items run by the `gemm` crate's kernels (packed,
//! register-tiled, cache-blocked, chosen for the host's vector extensions at run time) instead
//! of by a GEMM generated for the dot.
//!
//! A kernel function generated for the dot calls [`axle_rt_gemm`] with its descriptor
//! ([`LibraryGemm::encode`]), its operands and result, and the range of work items it was
//! given; the runtime's pool hands out the ranges as for any kernel. A work item is one batch
//! and one panel of rows (or of columns) of `C`: the panels depend on the dot's sizes only,
//! never on the thread count, and each item calls the crate's sequential GEMM on its panel,
//! `K` in blocks of [`LIBRARY_KC`], so every element's sum is computed in the same order
//! whichever thread runs it, at any thread count.
//!
//! Operands are read through their strides (a transposed, sliced or broadcast operand costs no
//! copy); `C` is row-major. Operands and result share one type, `f32` or `f64`.

use gemm::Parallelism;

/// The longest run of `k` one call of the crate's GEMM sums: each element's products are summed
/// in runs of at most this many (the crate's register tile chains them), and the runs' sums
/// added to `C` in order, so no rounding chain is much longer than this or than `K / KC` (a
/// chain over all of `K = 25600` is 30 times less accurate than XLA; `tests/long_sums.rs`).
const LIBRARY_KC: i64 = 256;

/// A dot as the precompiled GEMM runs it: `C[b] = A[b] @ B[b]` for every batch `b`, `A` of
/// `m x k`, `B` of `k x n`, `C` row-major `m x n`, strides in elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LibraryGemm {
    /// `f64` (else `f32`).
    pub f64: bool,
    pub m: i64,
    pub n: i64,
    pub k: i64,
    /// Strides of `A` along `m` and `k`, of `B` along `k` and `n`.
    pub a_sm: i64,
    pub a_sk: i64,
    pub b_sk: i64,
    pub b_sn: i64,
    /// Whether panels split the rows (else the columns).
    pub by_rows: bool,
    /// Rows (or columns) per panel; the last panel may be narrower.
    pub panel: i64,
    /// Sizes of the batch dimensions, and their strides in `A` and `B`.
    pub batch: Vec<i64>,
    pub lb_st: Vec<i64>,
    pub rb_st: Vec<i64>,
}

impl LibraryGemm {
    /// Panels per batch.
    pub fn panels(&self) -> i64 {
        let dim = if self.by_rows { self.m } else { self.n };
        (dim + self.panel - 1) / self.panel.max(1)
    }

    /// Work items: one per batch and panel.
    pub fn items(&self) -> i64 {
        self.batch.iter().product::<i64>() * self.panels()
    }

    /// The descriptor: its length, the fields in declaration order, then the batch sizes and
    /// strides (their count first).
    pub fn encode(&self) -> Vec<i64> {
        let mut d = vec![
            0,
            self.f64 as i64,
            self.m,
            self.n,
            self.k,
            self.a_sm,
            self.a_sk,
            self.b_sk,
            self.b_sn,
            self.by_rows as i64,
            self.panel,
            self.batch.len() as i64,
        ];
        d.extend_from_slice(&self.batch);
        d.extend_from_slice(&self.lb_st);
        d.extend_from_slice(&self.rb_st);
        d[0] = d.len() as i64;
        d
    }

    /// Reads a descriptor [`LibraryGemm::encode`] wrote.
    fn decode(d: &[i64]) -> Option<LibraryGemm> {
        let head = d.get(..12)?;
        let nb = usize::try_from(head[11]).ok()?;
        if d.len() != 12 + 3 * nb || head[0] != d.len() as i64 {
            return None;
        }
        let g = LibraryGemm {
            f64: head[1] != 0,
            m: head[2],
            n: head[3],
            k: head[4],
            a_sm: head[5],
            a_sk: head[6],
            b_sk: head[7],
            b_sn: head[8],
            by_rows: head[9] != 0,
            panel: head[10],
            batch: d[12..12 + nb].to_vec(),
            lb_st: d[12 + nb..12 + 2 * nb].to_vec(),
            rb_st: d[12 + 2 * nb..].to_vec(),
        };
        (g.m > 0 && g.n > 0 && g.k > 0 && g.panel > 0 && g.batch.iter().all(|&b| b > 0))
            .then_some(g)
    }

    /// Runs work items `start..end`.
    ///
    /// # Safety
    /// `a`, `b` and `c` must hold the operands and result this descriptor describes, of its
    /// element type; no other thread may write the items' blocks of `c` meanwhile.
    unsafe fn run<T: 'static + Copy>(
        &self,
        one: T,
        a: *const T,
        b: *const T,
        c: *mut T,
        start: i64,
        end: i64,
    ) {
        let panels = self.panels();
        for item in start..end {
            let (mut bi, p) = (item / panels, item % panels);
            let c_off = bi * self.m * self.n;
            let (mut a_off, mut b_off) = (0i64, 0i64);
            for d in (0..self.batch.len()).rev() {
                let x = bi % self.batch[d];
                bi /= self.batch[d];
                a_off += x * self.lb_st[d];
                b_off += x * self.rb_st[d];
            }
            let lo = p * self.panel;
            let (rows, cols) = if self.by_rows {
                ((self.m - lo).min(self.panel), self.n)
            } else {
                (self.m, (self.n - lo).min(self.panel))
            };
            let (a_off, b_off, c_off) = if self.by_rows {
                (a_off + lo * self.a_sm, b_off, c_off + lo * self.n)
            } else {
                (a_off, b_off + lo * self.b_sn, c_off + lo)
            };
            // `K` in blocks of at most LIBRARY_KC: the first block writes `C`, each later one
            // adds its products to it.
            let mut k0 = 0;
            while k0 < self.k {
                let kb = (self.k - k0).min(LIBRARY_KC);
                // SAFETY: the offsets stay inside the operands and the result (the caller's
                // contract with the descriptor's sizes and strides); the first block does not
                // read `C` (`read_dst` off), so its old contents never matter.
                unsafe {
                    gemm::gemm(
                        rows as usize,
                        cols as usize,
                        kb as usize,
                        c.offset(c_off as isize),
                        1,
                        self.n as isize,
                        k0 > 0,
                        a.offset((a_off + k0 * self.a_sk) as isize),
                        self.a_sk as isize,
                        self.a_sm as isize,
                        b.offset((b_off + k0 * self.b_sk) as isize),
                        self.b_sn as isize,
                        self.b_sk as isize,
                        one,
                        one,
                        false,
                        false,
                        false,
                        Parallelism::None,
                    )
                }
                k0 += kb;
            }
        }
    }
}

/// The runtime entry point of the precompiled GEMM: runs work items `start..end` of the dot
/// `desc` describes ([`LibraryGemm::encode`]) on operands `a`, `b` and result `c`. A
/// descriptor the compiler did not write aborts the process rather than compute a wrong
/// answer.
///
/// # Safety
/// `desc` must be a descriptor the compiler emitted, and `a`, `b`, `c` the buffers of its dot
/// (where the operands' views start).
pub(crate) unsafe extern "C" fn axle_rt_gemm(
    desc: *const i64,
    a: *const u8,
    b: *const u8,
    c: *mut u8,
    start: i64,
    end: i64,
) {
    // SAFETY: a descriptor the compiler emitted (the caller's contract).
    unsafe {
        super::with_descriptor("axle_rt_gemm", desc, |d| {
            let g = LibraryGemm::decode(d)?;
            if start < 0 || end > g.items() {
                return None;
            }
            // SAFETY: the buffers of the dot the descriptor describes (the caller's contract).
            if g.f64 {
                g.run(1f64, a.cast(), b.cast(), c.cast(), start, end);
            } else {
                g.run(1f32, a.cast(), b.cast(), c.cast(), start, end);
            }
            Some(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `5 x k` by `k x 7` dot, `B` transposed, batches `k * 5` and `k * 7` elements apart.
    fn dot(by_rows: bool, panel: i64, k: i64, batch: Vec<i64>) -> LibraryGemm {
        let nb = batch.len() as i64;
        LibraryGemm {
            f64: false,
            m: 5,
            n: 7,
            k,
            a_sm: k,
            a_sk: 1,
            b_sk: 1,
            b_sn: k,
            by_rows,
            panel,
            lb_st: (0..nb).map(|d| 5 * k * (d + 1)).collect(),
            rb_st: (0..nb).map(|d| 7 * k * (d + 1)).collect(),
            batch,
        }
    }

    #[test]
    fn descriptors_round_trip() {
        for g in [dot(true, 2, 3, vec![]), dot(false, 4, 3, vec![2, 3])] {
            let d = g.encode();
            assert_eq!(LibraryGemm::decode(&d), Some(g));
            assert_eq!(LibraryGemm::decode(&d[..d.len() - 1]), None);
        }
    }

    /// Each item computes its block of `C` whatever ran before it (results start as NaN, items
    /// run in reverse), over several blocks of `K`, and the block covers each element once:
    /// the products' sums exactly (small integers and halves, exact in `f32`).
    #[test]
    fn items_cover_the_result_once() {
        for (by_rows, panel, k) in [(true, 2, 3), (false, 3, 600), (false, 7, 257)] {
            let g = dot(by_rows, panel, k, vec![2]);
            let k = k as usize;
            let a: Vec<f32> = (0..2 * 5 * k).map(|i| (i % 7) as f32 - 3.0).collect();
            let b: Vec<f32> = (0..2 * 7 * k).map(|i| (i % 5) as f32 * 0.5).collect();
            let mut c = vec![f32::NAN; 2 * 35];
            // SAFETY: buffers of the described sizes (two batches, `B` transposed).
            unsafe {
                for i in (0..g.items()).rev() {
                    g.run(1f32, a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), i, i + 1);
                }
            }
            for bi in 0..2 {
                for i in 0..5 {
                    for j in 0..7 {
                        let s: f32 = (0..k)
                            .map(|p| a[(bi * 5 + i) * k + p] * b[(bi * 7 + j) * k + p])
                            .sum();
                        assert_eq!(c[bi * 35 + i * 7 + j], s, "({bi}, {i}, {j}), k {k}");
                    }
                }
            }
        }
    }
}
