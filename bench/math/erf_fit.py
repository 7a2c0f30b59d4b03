#!/usr/bin/env python3
"""Fits the polynomials of the inline f32 erf (codegen-llvm/src/math.rs `erf`) and prints them
rounded to f32, highest degree first, as math.rs lists them.

    jaxenv/bin/python bench/math/erf_fit.py      # needs numpy and scipy

Each is a weighted minimax fit: least squares on Chebyshev points whose weights are raised by
Lawson's rule (w *= |error|) until the largest error stops falling. Errors are printed in units
of 2^-24 (an ulp of results in [0.5, 1)):
- c(t), t = x^2, |x| < 1: erf(x) = x + x c(t), error relative to erf(x);
- k(u), u = |x| - 1, |x| in [1, 4]: erf(|x|) = 1 - 2^k(u), k ~ log2(erfc), error weighted by
  erfc (the absolute error it makes in erf);
- q(r), |r| <= 1/2: 2^r = 1 + r q(r), error relative to 2^r.
erf_exhaustive.c then measures the f32 evaluation over every input.
"""
import numpy as np
from scipy.special import erf, erfc

N = 8000
EPS = 2.0 ** -24


def lawson(basis, target, weight, iters=300):
    """Weighted minimax coefficients of `basis` columns for `target`, and the largest error."""
    w = np.ones(len(target)) / len(target)
    best = None
    for _ in range(iters):
        sw = np.sqrt(w) * weight
        c, *_ = np.linalg.lstsq(basis * sw[:, None], target * sw, rcond=None)
        err = (basis @ c - target) * weight
        e = np.abs(err).max()
        if best is None or e < best[0]:
            best = (e, c)
        w = w * np.abs(err) + 1e-300
        w /= w.sum()
    return best


def cheb(lo, hi):
    s = np.cos(np.pi * (np.arange(N) + 0.5) / N)
    return (hi - lo) / 2 * s + (hi + lo) / 2


def show(name, e, c):
    print(f"{name}: max error {e:.4f} x 2^-24")
    print("    " + ", ".join(f"{np.float32(v):.9e}" for v in c[::-1]))


# c(t) on t in [0, 1].
t = cheb(0.0, 1.0)
x = np.sqrt(t)
f = np.where(x > 0, erf(x) / np.where(x > 0, x, 1), 2 / np.sqrt(np.pi))
e, c = lawson(t[:, None] ** np.arange(7), f - 1, 1 / f / EPS)
show("c (near piece, in x^2)", e, c)

# k(u) on |x| in [1, 4].
x = cheb(1.0, 4.0)
u = x - 1
e, c = lawson(u[:, None] ** np.arange(7), np.log2(erfc(x)), erfc(x) * np.log(2) / EPS)
show("k (far piece, log2 erfc)", e, c)

# q(r) on |r| <= 1/2 (a little more, for the rounding of n).
r = cheb(-0.50025, 0.50025)
q = np.where(r != 0, np.expm1(r * np.log(2)) / np.where(r != 0, r, 1), np.log(2))
e, c = lawson(r[:, None] ** np.arange(6), q, np.abs(r) / np.exp2(r) / EPS)
show("q (2^r = 1 + r q)", e, c)
