#!/usr/bin/env python3
"""Axle (cpu and interpreter) against XLA CPU on the outputs of one HLO text file.

    jaxenv/bin/python bench/xla/differential.py FILE.hlo [--axle target/release/axle]
        [--seed S] [--rtol R] [--atol A] [--keep DIR]

For a model whose constants XLA elided, first fill them with
`axle parse MODEL.hlo --elided-constants random --seed S > FILLED.hlo`, then run this on
FILLED.hlo: both sides then compute the same program on the same data. Inputs are generated as
side_by_side.py does (normal floats, integers in [0, 16)) and written as .npy; XLA compiles the
text as compile_hlo_text does and runs once; `axle run --backend cpu` and `--backend interpreter`
run on the same .npy inputs; every output leaf is compared with numpy's allclose (NaN matching
NaN), cpu against XLA and cpu against the interpreter. Exits non-zero on any mismatch. A last
line compares the interpreter with XLA, the rounding noise between two other implementations,
for reading the others (it does not count).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from side_by_side import ROOT, compile_hlo_text, entry_signature, make_inputs  # noqa: E402


def axle_outputs(axle, path, inputs, backend, out_dir):
    cmd = [axle, "run", path, "--backend", backend, "--out-dir", out_dir, "--quiet"]
    for p in inputs:
        cmd += ["--input", p]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"axle run --backend {backend} failed:\n{r.stderr}")
    outs = []
    k = 0
    while os.path.exists(os.path.join(out_dir, f"out{k}.npy")):
        outs.append(np.load(os.path.join(out_dir, f"out{k}.npy")))
        k += 1
    return outs


def compare(name, a, b, rtol, atol):
    bad = 0
    if len(a) != len(b):
        print(f"{name}: {len(a)} vs {len(b)} outputs")
        return 1
    for k, (x, y) in enumerate(zip(a, b)):
        x = np.asarray(x, dtype=np.float64) if x.dtype.kind == "f" or x.dtype.kind == "V" else x
        y = np.asarray(y, dtype=np.float64) if y.dtype.kind == "f" or y.dtype.kind == "V" else y
        ok = x.shape == y.shape and np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True)
        err = float(np.max(np.abs(x - y))) if x.shape == y.shape and x.size else 0.0
        print(f"{name} out{k} {list(x.shape)}: {'match' if ok else 'MISMATCH'} (max abs diff {err:.3g}, "
              f"max |value| {float(np.max(np.abs(y))) if y.size else 0.0:.3g})")
        bad += not ok
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--axle", default=os.path.join(ROOT, "target", "release", "axle"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rtol", type=float, default=1e-2)
    ap.add_argument("--atol", type=float, default=1e-2)
    ap.add_argument("--keep", default=None)
    a = ap.parse_args()
    import jax
    text = open(a.file).read()
    params, _, _ = entry_signature(text)
    inputs = make_inputs(params, a.seed)
    d = a.keep or tempfile.mkdtemp(prefix="diff-")
    os.makedirs(d, exist_ok=True)
    paths = []
    for k, x in enumerate(inputs):
        p = os.path.join(d, f"in{k}.npy")
        np.save(p, x)
        paths.append(p)
    exe = compile_hlo_text(text)
    dev = jax.devices("cpu")[0]
    outs = exe.execute_sharded([jax.device_put(x, dev) for x in inputs])
    xla = [np.asarray(o[0]) for o in outs.disassemble_into_single_device_arrays()]
    cpu = axle_outputs(a.axle, a.file, paths, "cpu", os.path.join(d, "cpu"))
    interp = axle_outputs(a.axle, a.file, paths, "interpreter", os.path.join(d, "interpreter"))
    bad = compare("cpu vs XLA", cpu, xla, a.rtol, a.atol)
    bad += compare("cpu vs interpreter", cpu, interp, a.rtol, a.atol)
    # The rounding noise floor, for reading the lines above: XLA against Axle's evaluator (a
    # third implementation). Large dot products of large values differ by rounding in every
    # implementation; where cpu-vs-XLA differs no more than this, it is that noise. Not counted.
    compare("noise floor: interpreter vs XLA", interp, xla, a.rtol, a.atol)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
