"""Writes the XLA reference table of analysis/tests/mulhi.rs: `jax.lax.mulhi` run by XLA CPU
(jax/jaxlib 0.10.2) on every integer type, on all pairs of the extremes (min, -1, 0, 1, max for
signed types; 0, 1, 2, 2^(N-1), max for unsigned ones) plus six random pairs (seed 7), and on
all pairs of values for the 2- and 4-bit types. Prints the Rust table to paste into mulhi.rs.

    JAX_PLATFORMS=cpu /work/jaxenv/bin/python analysis/tests/mulhi_ref.py
"""
import random

import jax
import ml_dtypes
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)
random.seed(7)
TYPES = [("s2", ml_dtypes.int2, 2, True), ("s4", ml_dtypes.int4, 4, True),
         ("u2", ml_dtypes.uint2, 2, False), ("u4", ml_dtypes.uint4, 4, False),
         ("s8", np.int8, 8, True), ("s16", np.int16, 16, True), ("s32", np.int32, 32, True),
         ("s64", np.int64, 64, True), ("u8", np.uint8, 8, False), ("u16", np.uint16, 16, False),
         ("u32", np.uint32, 32, False), ("u64", np.uint64, 64, False)]


def main():
    print("const CASES: &[Case] = &[")
    for name, dt, n, signed in TYPES:
        lo, hi = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if signed else (0, (1 << n) - 1)
        if n <= 4:
            pairs = [(x, y) for x in range(lo, hi + 1) for y in range(lo, hi + 1)]
        else:
            ext = [lo, -1, 0, 1, hi] if signed else [0, 1, 2, 1 << (n - 1), hi]
            pairs = [(x, y) for x in ext for y in ext]
            pairs += [(random.randint(lo, hi), random.randint(lo, hi)) for _ in range(6)]
        a = np.array([p[0] for p in pairs], dtype=object).astype(dt)
        b = np.array([p[1] for p in pairs], dtype=object).astype(dt)
        got = np.asarray(jax.jit(lax.mulhi)(a, b)).astype(object)
        want = ", ".join(str(int(v)) for v in got)
        if n <= 4:
            print(f"    Case {{ ty: {name.upper()}, pairs: Pairs::All, want: &[{want}] }},")
        else:
            xs = ", ".join(str(p[0]) for p in pairs)
            ys = ", ".join(str(p[1]) for p in pairs)
            print(f"    Case {{ ty: {name.upper()}, pairs: Pairs::Listed(&[{xs}], &[{ys}]), "
                  f"want: &[{want}] }},")
    print("];")


if __name__ == "__main__":
    main()
