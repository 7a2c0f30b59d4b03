//! The runtime library: the operations XLA's CPU backend also runs as calls into a library
//! rather than as generated loops (FFT, Cholesky, triangular solves and the LAPACK custom calls
//! JAX emits), written in Rust and called from generated code through a host-call thunk; and
//! the precompiled GEMM ([`gemm`]) and convolution ([`conv`]) that dot and convolution kernels
//! call on their work items.
//!
//! The ABI of every host-call entry point is
//! `void axle_rt_NAME(const int64_t *desc, void *const *bufs)`: `desc` is a constant array the
//! compiler emits (its first entry is its own length, then the routine's element type, sizes
//! and flags, see [`Call::encode`]) and `bufs` holds the operand buffers followed by the result
//! buffers, dense and row-major. The JIT maps the symbols to these functions ([`symbols`]);
//! ahead-of-time objects do not include the library, so `compile_aot` refuses modules that
//! need it (and compiles dots and convolutions to generated kernels, not to
//! [`gemm::axle_rt_gemm`] and [`conv::axle_rt_conv`], whose ABI is their own).
//!
//! Every routine computes in the operation's own precision (`f32` for `f32`/`c64`, like
//! LAPACK's `s` and `c` routines) on a private copy of its operands, on the calling thread, so
//! results are deterministic at any thread count. The numerics live in [`fft`] (through the
//! `rustfft` crate) and [`linalg`] (LAPACK's unblocked algorithms, and Jacobi's methods for the
//! eigen- and singular value decompositions).

pub(crate) mod collective;
pub(crate) mod conv;
pub(crate) mod fft;
pub(crate) mod gemm;
pub(crate) mod linalg;
pub(crate) mod radix;

use std::ops::{Add, Div, Mul, Neg, Sub};

use num_complex::Complex;
use num_traits::Float;

/// The element type of a runtime call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Elem {
    F32 = 0,
    F64 = 1,
    C64 = 2,
    C128 = 3,
}

impl Elem {
    /// The runtime element type for an HLO element type, if the library handles it.
    pub fn of(t: axle_ir::ElementType) -> Option<Elem> {
        use axle_ir::ElementType as E;
        Some(match t {
            E::F32 => Elem::F32,
            E::F64 => Elem::F64,
            E::C64 => Elem::C64,
            E::C128 => Elem::C128,
            _ => return None,
        })
    }

    /// Whether the type is real (`f32`, `f64`), not complex: real eigenvalue routines hand
    /// back their eigenvalues as real and imaginary parts in two buffers, complex ones in one.
    fn is_real(self) -> bool {
        matches!(self, Elem::F32 | Elem::F64)
    }

    fn from_code(c: i64) -> Option<Elem> {
        Some(match c {
            0 => Elem::F32,
            1 => Elem::F64,
            2 => Elem::C64,
            3 => Elem::C128,
            _ => return None,
        })
    }
}

pub(crate) use axle_analysis::fft::FftKind;
pub(crate) use axle_analysis::trsm::TriSolve;

/// One runtime call with its sizes and flags (what the descriptor encodes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    /// `fft`: buffers `[operand, result]`; transforms the last `axes` dimensions. `elem` is
    /// the complex type of the transform (`C64` or `C128`).
    Fft {
        elem: Elem,
        kind: FftKind,
        axes: usize,
        in_dims: Vec<i64>,
        out_dims: Vec<i64>,
    },
    /// Cholesky factorization of `batch` `n`-by-`n` matrices. `lapack` (`?potrf`): buffers
    /// `[a, factor, info]`, the other triangle is kept and the first non-positive leading minor
    /// stops the factorization and is reported in `info`. Otherwise (the `cholesky`
    /// instruction): buffers `[a, factor]`, the other triangle is zeroed and a matrix that is
    /// not positive definite yields NaNs.
    Potrf {
        elem: Elem,
        batch: usize,
        n: usize,
        lower: bool,
        lapack: bool,
    },
    /// `?getrf`: buffers `[a, lu, pivots (s32, 1-based), info (s32)]` for `batch` `m`-by-`n`
    /// matrices.
    Getrf {
        elem: Elem,
        batch: usize,
        m: usize,
        n: usize,
    },
    /// A triangular solve (`triangular-solve`, `?trsm`): buffers `[a, b, x]`; solves
    /// `op(T) X = B` (`left`) or `X op(T) = B` with `T` the `lower` or upper triangle of the
    /// `m`-by-`m` matrices of `a` (unit diagonal if `unit`) and `B` `rows`-by-`cols`; `op`
    /// transposes if `transpose`, and conjugates too if `adjoint` ([`TriSolve`]).
    Trsm { elem: Elem, solve: TriSolve },
    /// `?geqrf`: buffers `[a, qr, tau]` for `batch` `m`-by-`n` matrices
    /// ([`axle_analysis::householder::geqrf`]).
    Geqrf {
        elem: Elem,
        batch: usize,
        m: usize,
        n: usize,
    },
    /// `?orgqr` / `?ungqr`: buffers `[a, tau, q]`, `k` reflectors of `batch` `m`-by-`n`
    /// matrices ([`axle_analysis::householder::ungqr`]).
    Orgqr {
        elem: Elem,
        batch: usize,
        m: usize,
        n: usize,
        k: usize,
    },
    /// `?syevd` / `?heevd`: buffers `[a, vectors, values (real), info (s32)]` for `batch`
    /// symmetric or Hermitian `n`-by-`n` matrices, reading the `lower` (else upper) triangle;
    /// `vectors` (`mode = V`) or the operand unchanged (`mode = N`) in the first result.
    Syevd {
        elem: Elem,
        batch: usize,
        n: usize,
        lower: bool,
        vectors: bool,
    },
    /// `?gesdd`: buffers `[a, a_out, s, u, vt, info (s32)]` for `batch` `m`-by-`n` matrices;
    /// `U` and `V^T` square (`full`, `mode = A`), thin (`mode = S`), or, without `vectors`
    /// (`mode = N`), zeros of `u_len` and `vt_len` elements in all; `s` of the real type.
    /// `a_out` is the operand unchanged.
    Gesdd {
        elem: Elem,
        batch: usize,
        m: usize,
        n: usize,
        vectors: bool,
        full: bool,
        u_len: usize,
        vt_len: usize,
    },
    /// `?gtsv`: buffers `[dl, d, du, b, dl_out, d_out, du_out, x, info (s32)]` for `batch`
    /// tridiagonal systems of order `n` (JAX's diagonals of length `n`) with `nrhs`
    /// right-hand sides ([`axle_analysis::tridiagonal::gtsv`]).
    Gtsv {
        elem: Elem,
        batch: usize,
        n: usize,
        nrhs: usize,
    },
    /// `?geqp3`: buffers `[a, jpvt (s32), qr, jpvt_out (s32), tau]` for `batch` `m`-by-`n`
    /// matrices ([`axle_analysis::householder::geqp3`]).
    Geqp3 {
        elem: Elem,
        batch: usize,
        m: usize,
        n: usize,
    },
    /// `?ormqr` / `?unmqr`: buffers `[a, tau, c, out]`; `out` is `Q C` (`left`) or `C Q`, with
    /// `Q^H` for `Q` if `adjoint`, for `batch` `rows`-by-`cols` matrices `c` and `Q` of the `k`
    /// reflectors of the `m`-by-`na` `a` ([`axle_analysis::householder::unmqr`]).
    Ormqr {
        elem: Elem,
        batch: usize,
        m: usize,
        na: usize,
        k: usize,
        rows: usize,
        cols: usize,
        left: bool,
        adjoint: bool,
    },
    /// `?sytrd` / `?hetrd`: buffers `[a, a_out, d (real), e (real), tau, info (s32)]` for
    /// `batch` `n`-by-`n` matrices, reading the `lower` (else upper) triangle
    /// ([`axle_analysis::reduction::hetrd`]).
    Sytrd {
        elem: Elem,
        batch: usize,
        n: usize,
        lower: bool,
    },
    /// `?gehrd`: buffers `[a, a_out, tau, info (s32)]` for `batch` `n`-by-`n` matrices reduced
    /// between LAPACK's 1-based `ilo` and `ihi` ([`axle_analysis::reduction::gehrd`]).
    Gehrd {
        elem: Elem,
        batch: usize,
        n: usize,
        ilo: usize,
        ihi: usize,
    },
    /// `?gees` without sorting: buffers `[a, t, z, wr, wi, sdim (s32), info (s32)]` for real
    /// types and `[a, t, z, w, sdim, info]` for complex ones, for `batch` `n`-by-`n` matrices;
    /// `z` holds zeros unless `vectors` ([`axle_analysis::schur::gees`]).
    Gees {
        elem: Elem,
        batch: usize,
        n: usize,
        vectors: bool,
    },
    /// `?geev`: buffers `[a, wr, wi, vl, vr, info (s32)]` for real types and
    /// `[a, w, vl, vr, info]` for complex ones, for `batch` `n`-by-`n` matrices; the vectors
    /// are complex for every type, zeros unless `left` / `right`
    /// ([`axle_analysis::geev::geev`]).
    Geev {
        elem: Elem,
        batch: usize,
        n: usize,
        left: bool,
        right: bool,
    },
    /// JAX's `tridiagonal_solve_perturbed_ffi`: buffers `[dl, d, du, b, x]`, as [`Call::Gtsv`]
    /// without `info` ([`axle_analysis::tridiagonal::solve_perturbed`]).
    GtsvPerturbed {
        elem: Elem,
        batch: usize,
        n: usize,
        nrhs: usize,
    },
    /// A collective (or `replica-id`, `partition-id`, a shard_map boundary) on the device the
    /// calling thread runs as ([`collective`]).
    Collective(Box<collective::Coll>),
}

impl Call {
    /// The runtime function's symbol.
    pub fn symbol(&self) -> &'static str {
        match self {
            Call::Fft { .. } => "axle_rt_fft",
            Call::Potrf { .. } => "axle_rt_potrf",
            Call::Getrf { .. } => "axle_rt_getrf",
            Call::Trsm { .. } => "axle_rt_trsm",
            Call::Geqrf { .. } => "axle_rt_geqrf",
            Call::Orgqr { .. } => "axle_rt_orgqr",
            Call::Syevd { .. } => "axle_rt_syevd",
            Call::Gesdd { .. } => "axle_rt_gesdd",
            Call::Gtsv { .. } => "axle_rt_gtsv",
            Call::Ormqr { .. } => "axle_rt_ormqr",
            Call::Geqp3 { .. } => "axle_rt_geqp3",
            Call::Sytrd { .. } => "axle_rt_sytrd",
            Call::Gehrd { .. } => "axle_rt_gehrd",
            Call::Gees { .. } => "axle_rt_gees",
            Call::Geev { .. } => "axle_rt_geev",
            Call::GtsvPerturbed { .. } => "axle_rt_gtsv_perturbed",
            Call::Collective(_) => "axle_rt_collective",
        }
    }

    /// The descriptor: its length, then the fields in declaration order (flags as 0/1, a
    /// dimension list as its length and entries).
    pub fn encode(&self) -> Vec<i64> {
        let mut d = vec![0i64];
        let b = |x: bool| x as i64;
        match self {
            Call::Fft {
                elem,
                kind,
                axes,
                in_dims,
                out_dims,
            } => {
                d.extend([*elem as i64, *kind as i64, *axes as i64]);
                d.push(in_dims.len() as i64);
                d.extend_from_slice(in_dims);
                d.push(out_dims.len() as i64);
                d.extend_from_slice(out_dims);
            }
            Call::Potrf {
                elem,
                batch,
                n,
                lower,
                lapack,
            } => d.extend([
                *elem as i64,
                *batch as i64,
                *n as i64,
                b(*lower),
                b(*lapack),
            ]),
            Call::Getrf { elem, batch, m, n }
            | Call::Geqrf { elem, batch, m, n }
            | Call::Geqp3 { elem, batch, m, n } => {
                d.extend([*elem as i64, *batch as i64, *m as i64, *n as i64])
            }
            Call::Trsm { elem, solve: t } => d.extend([
                *elem as i64,
                t.batch as i64,
                t.m as i64,
                t.rows as i64,
                t.cols as i64,
                b(t.left),
                b(t.lower),
                b(t.unit),
                b(t.transpose),
                b(t.adjoint),
            ]),
            Call::Orgqr {
                elem,
                batch,
                m,
                n,
                k,
            } => d.extend([*elem as i64, *batch as i64, *m as i64, *n as i64, *k as i64]),
            Call::Syevd {
                elem,
                batch,
                n,
                lower,
                vectors,
            } => d.extend([
                *elem as i64,
                *batch as i64,
                *n as i64,
                b(*lower),
                b(*vectors),
            ]),
            Call::Gesdd {
                elem,
                batch,
                m,
                n,
                vectors,
                full,
                u_len,
                vt_len,
            } => d.extend([
                *elem as i64,
                *batch as i64,
                *m as i64,
                *n as i64,
                b(*vectors),
                b(*full),
                *u_len as i64,
                *vt_len as i64,
            ]),
            Call::Gtsv {
                elem,
                batch,
                n,
                nrhs,
            }
            | Call::GtsvPerturbed {
                elem,
                batch,
                n,
                nrhs,
            } => d.extend([*elem as i64, *batch as i64, *n as i64, *nrhs as i64]),
            Call::Ormqr {
                elem,
                batch,
                m,
                na,
                k,
                rows,
                cols,
                left,
                adjoint,
            } => d.extend([
                *elem as i64,
                *batch as i64,
                *m as i64,
                *na as i64,
                *k as i64,
                *rows as i64,
                *cols as i64,
                b(*left),
                b(*adjoint),
            ]),
            Call::Sytrd {
                elem,
                batch,
                n,
                lower,
            } => d.extend([*elem as i64, *batch as i64, *n as i64, b(*lower)]),
            Call::Gehrd {
                elem,
                batch,
                n,
                ilo,
                ihi,
            } => d.extend([
                *elem as i64,
                *batch as i64,
                *n as i64,
                *ilo as i64,
                *ihi as i64,
            ]),
            Call::Gees {
                elem,
                batch,
                n,
                vectors,
            } => d.extend([*elem as i64, *batch as i64, *n as i64, b(*vectors)]),
            Call::Geev {
                elem,
                batch,
                n,
                left,
                right,
            } => d.extend([*elem as i64, *batch as i64, *n as i64, b(*left), b(*right)]),
            Call::Collective(c) => c.encode_into(&mut d),
        }
        d[0] = d.len() as i64;
        d
    }

    /// Reads a descriptor written by [`Call::encode`] for the routine `symbol`.
    fn decode(symbol: &str, d: &[i64]) -> Option<Call> {
        if symbol == "axle_rt_collective" {
            return collective::Coll::decode(d.get(1..)?).map(|c| Call::Collective(Box::new(c)));
        }
        let mut it = d.iter().copied().skip(1);
        let mut next = || it.next();
        let elem = Elem::from_code(next()?)?;
        let u = |x: i64| usize::try_from(x).ok();
        Some(match symbol {
            "axle_rt_fft" => {
                let kind = match next()? {
                    0 => FftKind::Fft,
                    1 => FftKind::Ifft,
                    2 => FftKind::Rfft,
                    3 => FftKind::Irfft,
                    _ => return None,
                };
                let axes = u(next()?)?;
                let r = u(next()?)?;
                let in_dims = (0..r).map(|_| next()).collect::<Option<Vec<_>>>()?;
                let r = u(next()?)?;
                let out_dims = (0..r).map(|_| next()).collect::<Option<Vec<_>>>()?;
                Call::Fft {
                    elem,
                    kind,
                    axes,
                    in_dims,
                    out_dims,
                }
            }
            "axle_rt_potrf" => Call::Potrf {
                elem,
                batch: u(next()?)?,
                n: u(next()?)?,
                lower: next()? != 0,
                lapack: next()? != 0,
            },
            "axle_rt_getrf" => Call::Getrf {
                elem,
                batch: u(next()?)?,
                m: u(next()?)?,
                n: u(next()?)?,
            },
            "axle_rt_geqrf" => Call::Geqrf {
                elem,
                batch: u(next()?)?,
                m: u(next()?)?,
                n: u(next()?)?,
            },
            "axle_rt_trsm" => Call::Trsm {
                elem,
                solve: TriSolve {
                    batch: u(next()?)?,
                    m: u(next()?)?,
                    rows: u(next()?)?,
                    cols: u(next()?)?,
                    left: next()? != 0,
                    lower: next()? != 0,
                    unit: next()? != 0,
                    transpose: next()? != 0,
                    adjoint: next()? != 0,
                },
            },
            "axle_rt_orgqr" => Call::Orgqr {
                elem,
                batch: u(next()?)?,
                m: u(next()?)?,
                n: u(next()?)?,
                k: u(next()?)?,
            },
            "axle_rt_syevd" => Call::Syevd {
                elem,
                batch: u(next()?)?,
                n: u(next()?)?,
                lower: next()? != 0,
                vectors: next()? != 0,
            },
            "axle_rt_gesdd" => Call::Gesdd {
                elem,
                batch: u(next()?)?,
                m: u(next()?)?,
                n: u(next()?)?,
                vectors: next()? != 0,
                full: next()? != 0,
                u_len: u(next()?)?,
                vt_len: u(next()?)?,
            },
            "axle_rt_gtsv" => Call::Gtsv {
                elem,
                batch: u(next()?)?,
                n: u(next()?)?,
                nrhs: u(next()?)?,
            },
            "axle_rt_gtsv_perturbed" => Call::GtsvPerturbed {
                elem,
                batch: u(next()?)?,
                n: u(next()?)?,
                nrhs: u(next()?)?,
            },
            "axle_rt_geqp3" => Call::Geqp3 {
                elem,
                batch: u(next()?)?,
                m: u(next()?)?,
                n: u(next()?)?,
            },
            "axle_rt_ormqr" => Call::Ormqr {
                elem,
                batch: u(next()?)?,
                m: u(next()?)?,
                na: u(next()?)?,
                k: u(next()?)?,
                rows: u(next()?)?,
                cols: u(next()?)?,
                left: next()? != 0,
                adjoint: next()? != 0,
            },
            "axle_rt_sytrd" => Call::Sytrd {
                elem,
                batch: u(next()?)?,
                n: u(next()?)?,
                lower: next()? != 0,
            },
            "axle_rt_gehrd" => Call::Gehrd {
                elem,
                batch: u(next()?)?,
                n: u(next()?)?,
                ilo: u(next()?)?,
                ihi: u(next()?)?,
            },
            "axle_rt_gees" => Call::Gees {
                elem,
                batch: u(next()?)?,
                n: u(next()?)?,
                vectors: next()? != 0,
            },
            "axle_rt_geev" => Call::Geev {
                elem,
                batch: u(next()?)?,
                n: u(next()?)?,
                left: next()? != 0,
                right: next()? != 0,
            },
            _ => return None,
        })
    }
}

/// A scalar the linear-algebra routines compute with: `f32`, `f64` or a complex of either.
pub(crate) trait Scalar:
    Copy
    + PartialEq
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + 'static
{
    /// The real type of the components.
    type Real: Float;
    /// A value with real part `r` and no imaginary part.
    fn real(r: Self::Real) -> Self;
    /// `|re| + |im|`, the magnitude BLAS's `i?amax` compares.
    fn abs1(self) -> Self::Real;
    /// The modulus.
    fn modulus(self) -> Self::Real;
}

macro_rules! real_scalar {
    ($t:ty) => {
        impl Scalar for $t {
            type Real = $t;
            fn real(r: $t) -> $t {
                r
            }
            fn abs1(self) -> $t {
                self.abs()
            }
            fn modulus(self) -> $t {
                self.abs()
            }
        }
    };
}

macro_rules! complex_scalar {
    ($t:ty) => {
        impl Scalar for Complex<$t> {
            type Real = $t;
            fn real(r: $t) -> Self {
                Complex::new(r, 0.0)
            }
            fn abs1(self) -> $t {
                self.re.abs() + self.im.abs()
            }
            fn modulus(self) -> $t {
                self.re.hypot(self.im)
            }
        }
    };
}

real_scalar!(f32);
real_scalar!(f64);
complex_scalar!(f32);
complex_scalar!(f64);

/// A copy of the `n` elements of type `T` at `p` (which need not be aligned).
///
/// # Safety
/// `p` must point to `n` initialized elements of `T`'s layout.
pub(crate) unsafe fn read<T: Copy + Default>(p: *const u8, n: usize) -> Vec<T> {
    let mut v = vec![T::default(); n];
    if n > 0 {
        // SAFETY: `p` holds `n` elements (the caller's contract); `v` is a distinct allocation.
        unsafe { std::ptr::copy_nonoverlapping(p, v.as_mut_ptr() as *mut u8, n * size_of::<T>()) };
    }
    v
}

/// Writes `v` to `p` (which need not be aligned).
///
/// # Safety
/// `p` must be valid for writing `v.len()` elements of `T`'s layout.
pub(crate) unsafe fn write<T: Copy>(p: *mut u8, v: &[T]) {
    if !v.is_empty() {
        // SAFETY: the caller's contract; `v` is a distinct allocation.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr() as *const u8, p, size_of_val(v)) };
    }
}

/// Runs a decoded call on the buffer table `bufs`.
///
/// # Safety
/// `bufs` must hold the buffers the call's documentation lists, of the sizes its fields imply.
unsafe fn run(call: &Call, bufs: *const *mut u8) {
    // SAFETY: the caller's contract, forwarded to the routine.
    let buf = |i: usize| unsafe { *bufs.add(i) };
    // SAFETY: each routine reads and writes exactly the buffers and sizes of its call.
    unsafe {
        match call {
            Call::Fft { .. } => fft::run(call, buf(0), buf(1)),
            Call::Potrf { .. } => linalg::potrf(call, buf(0), buf(1), buf(2)),
            Call::Getrf { .. } => linalg::getrf(call, buf(0), buf(1), buf(2), buf(3)),
            Call::Trsm { .. } => linalg::trsm(call, buf(0), buf(1), buf(2)),
            Call::Geqrf { .. } => linalg::geqrf(call, buf(0), buf(1), buf(2)),
            Call::Orgqr { .. } => linalg::orgqr(call, buf(0), buf(1), buf(2)),
            Call::Syevd { .. } => linalg::syevd(call, buf(0), buf(1), buf(2), buf(3)),
            Call::Gesdd { .. } => {
                linalg::gesdd(call, [buf(0), buf(1), buf(2), buf(3), buf(4), buf(5)])
            }
            Call::Gtsv { .. } => linalg::gtsv(call, std::array::from_fn(buf)),
            Call::GtsvPerturbed { .. } => linalg::gtsv_perturbed(call, std::array::from_fn(buf)),
            Call::Ormqr { .. } => linalg::ormqr(call, std::array::from_fn(buf)),
            Call::Geqp3 { .. } => linalg::geqp3(call, std::array::from_fn(buf)),
            Call::Sytrd { .. } => linalg::sytrd(call, std::array::from_fn(buf)),
            Call::Gehrd { .. } => linalg::gehrd(call, std::array::from_fn(buf)),
            Call::Gees { elem, .. } => {
                let count = if elem.is_real() { 7 } else { 6 };
                linalg::gees(call, &(0..count).map(buf).collect::<Vec<_>>())
            }
            Call::Geev { elem, .. } => {
                let count = if elem.is_real() { 6 } else { 5 };
                linalg::geev(call, &(0..count).map(buf).collect::<Vec<_>>())
            }
            Call::Collective(c) => collective::run(c, bufs),
        }
    }
}

/// Decodes the descriptor and runs the call; a descriptor the compiler did not write, or a
/// failure inside the routine, aborts the process rather than return a wrong answer (a
/// collective's failures are the run's errors, [`collective::run_as`]).
///
/// # Safety
/// `desc` must be a descriptor [`Call::encode`] wrote for `symbol`, `bufs` its buffer table.
unsafe fn entry(symbol: &str, desc: *const i64, bufs: *const *mut u8) {
    // SAFETY: the caller's contract.
    unsafe {
        with_descriptor(symbol, desc, |d| {
            let call = Call::decode(symbol, d)?;
            // SAFETY: the buffer table of this call (the caller's contract).
            run(&call, bufs);
            Some(())
        })
    }
}

/// Runs `f` on the descriptor at `desc` (its first entry is its length) for the runtime's entry
/// point `symbol`; where `f` finds it wrong (`None`) or panics, aborts the process with a
/// message naming `symbol`, rather than compute a wrong answer or unwind into generated code.
///
/// # Safety
/// `desc` must point at a descriptor the compiler emitted (its first entry its length).
pub(crate) unsafe fn with_descriptor(
    symbol: &str,
    desc: *const i64,
    f: impl FnOnce(&[i64]) -> Option<()>,
) {
    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: the first entry of a descriptor is its length.
        let len = usize::try_from(unsafe { *desc }).ok()?;
        // SAFETY: a descriptor of `len` entries.
        f(unsafe { std::slice::from_raw_parts(desc, len) })
    }));
    if !matches!(done, Ok(Some(()))) {
        eprintln!("axle runtime: {symbol} failed on a descriptor the compiler did not write");
        std::process::abort();
    }
}

macro_rules! entry_points {
    ($($name:ident),*) => {
        $(
            #[doc = concat!("The runtime entry point `", stringify!($name), "`.")]
            ///
            /// # Safety
            /// `desc` must be a descriptor the compiler emitted for this routine and `bufs`
            /// its buffer table.
            pub(crate) unsafe extern "C" fn $name(desc: *const i64, bufs: *const *mut u8) {
                // SAFETY: forwarded from the caller.
                unsafe { entry(stringify!($name), desc, bufs) }
            }
        )*
        /// The runtime's symbols and the addresses of their functions, for the JIT.
        pub(crate) fn symbols() -> Vec<(&'static str, usize)> {
            vec![
                $((stringify!($name), $name as unsafe extern "C" fn(*const i64, *const *mut u8) as usize),)*
                ("axle_rt_failed", collective::axle_rt_failed as extern "C" fn() -> u8 as usize),
                ("axle_rt_conv", conv::axle_rt_conv as unsafe extern "C" fn(*const i64, *const u8, *const u8, *mut u8, i64, i64) as usize),
                ("axle_rt_gemm", gemm::axle_rt_gemm as unsafe extern "C" fn(*const i64, *const u8, *const u8, *mut u8, i64, i64) as usize),
                ("axle_rt_radix_sort", radix::axle_rt_radix_sort as unsafe extern "C" fn(*mut u8, *mut u8, i64, i64) -> *mut u8 as usize),
            ]
        }
    };
}

entry_points!(
    axle_rt_fft,
    axle_rt_potrf,
    axle_rt_getrf,
    axle_rt_trsm,
    axle_rt_geqrf,
    axle_rt_orgqr,
    axle_rt_syevd,
    axle_rt_gesdd,
    axle_rt_gtsv,
    axle_rt_gtsv_perturbed,
    axle_rt_ormqr,
    axle_rt_geqp3,
    axle_rt_sytrd,
    axle_rt_gehrd,
    axle_rt_gees,
    axle_rt_geev,
    axle_rt_collective
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_round_trip() {
        let calls = [
            Call::Fft {
                elem: Elem::C64,
                kind: FftKind::Irfft,
                axes: 2,
                in_dims: vec![2, 4, 4],
                out_dims: vec![2, 4, 6],
            },
            Call::Potrf {
                elem: Elem::C128,
                batch: 3,
                n: 5,
                lower: false,
                lapack: true,
            },
            Call::Getrf {
                elem: Elem::F32,
                batch: 1,
                m: 6,
                n: 4,
            },
            Call::Trsm {
                elem: Elem::F64,
                solve: TriSolve {
                    batch: 2,
                    m: 3,
                    rows: 3,
                    cols: 5,
                    left: true,
                    lower: false,
                    unit: true,
                    transpose: true,
                    adjoint: false,
                },
            },
            Call::Geqrf {
                elem: Elem::F64,
                batch: 2,
                m: 5,
                n: 3,
            },
            Call::Orgqr {
                elem: Elem::F32,
                batch: 2,
                m: 6,
                n: 4,
                k: 4,
            },
            Call::Syevd {
                elem: Elem::F64,
                batch: 2,
                n: 4,
                lower: true,
                vectors: false,
            },
            Call::Gesdd {
                elem: Elem::F32,
                batch: 3,
                m: 5,
                n: 2,
                vectors: true,
                full: false,
                u_len: 30,
                vt_len: 12,
            },
            Call::Gtsv {
                elem: Elem::C128,
                batch: 2,
                n: 7,
                nrhs: 3,
            },
            Call::GtsvPerturbed {
                elem: Elem::F32,
                batch: 3,
                n: 5,
                nrhs: 1,
            },
            Call::Geqp3 {
                elem: Elem::C128,
                batch: 2,
                m: 3,
                n: 5,
            },
            Call::Ormqr {
                elem: Elem::C64,
                batch: 2,
                m: 6,
                na: 4,
                k: 3,
                rows: 5,
                cols: 6,
                left: false,
                adjoint: true,
            },
            Call::Sytrd {
                elem: Elem::C128,
                batch: 1,
                n: 4,
                lower: false,
            },
            Call::Gehrd {
                elem: Elem::F64,
                batch: 2,
                n: 5,
                ilo: 1,
                ihi: 5,
            },
            Call::Gees {
                elem: Elem::C64,
                batch: 3,
                n: 4,
                vectors: true,
            },
            Call::Geev {
                elem: Elem::F32,
                batch: 2,
                n: 3,
                left: false,
                right: true,
            },
            Call::Collective(Box::new(collective::Coll {
                kind: collective::CollKind::ReduceScatter,
                label: "rs.1".into(),
                mode: axle_ir::collective::GroupMode::FlattenedId,
                groups: vec![vec![1, 0], vec![3, 2]],
                pairs: vec![[0, 3], [3, 0]],
                reducer: Some(axle_ir::Opcode::Maximum),
                dim: 1,
                operands: vec![collective::Arr {
                    ty: axle_ir::ElementType::BF16,
                    dims: vec![2, 8],
                }],
                prefix: 1,
                results: vec![collective::Arr {
                    ty: axle_ir::ElementType::BF16,
                    dims: vec![2, 4],
                }],
                suffix: vec![collective::Arr {
                    ty: axle_ir::ElementType::U32,
                    dims: vec![],
                }],
                starts: vec![vec![0, 0, 1, 0]],
                sdy_devices: vec![2],
                module_devices: 4,
            })),
        ];
        for c in calls {
            let d = c.encode();
            assert_eq!(d[0] as usize, d.len());
            assert_eq!(Call::decode(c.symbol(), &d), Some(c.clone()));
        }
        assert_eq!(Call::decode("axle_rt_nothing", &[2, 0]), None);
    }
}
