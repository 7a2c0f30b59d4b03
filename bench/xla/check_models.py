#!/usr/bin/env python3
"""Every case of a models folder (shared/models' format) on Axle, against XLA's stored outputs.

    jaxenv/bin/python bench/xla/check_models.py DATADIR [--axle target/release/axle]
        [--only a,b] [--forms hlo,opt] [--axle-arg ARG]...

DATADIR is what `gen_models.py --out DATADIR` writes (NAME.hlo, NAME.opt.hlo, the inputs and
XLA's outputs as .npy, manifest.json). For every case and form (`NAME.hlo`, JAX's module, and
`NAME.opt.hlo`, XLA's optimized one), runs `axle run FILE --input ... --out-dir TMP` and
compares every output with the manifest's tolerance: `exact` outputs bit for bit, the others as
numpy.isclose(rtol, atol) with NaN matching NaN. bf16 arrays travel as uint16 bits (as the
generator writes them) and are compared as bf16 values. Prints one line per case and form and
exits non-zero when any output misses.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def as_values(a, dtype):
    """The array's values: bf16 stored as uint16 bits is reinterpreted."""
    if dtype == "bf16" and a.dtype == np.uint16:
        import ml_dtypes
        return a.view(ml_dtypes.bfloat16)
    return a


def compare(exp, got, tol, dtype):
    if tol == "exact":
        ok = exp.dtype == got.dtype and exp.shape == got.shape and exp.tobytes() == got.tobytes()
        return ok, "bits differ" if not ok else ""
    e = as_values(exp, dtype).astype(np.float64)
    g = as_values(got, dtype).astype(np.float64)
    if e.shape != g.shape:
        return False, f"shape {g.shape} != {e.shape}"
    close = np.isclose(g, e, rtol=tol["rtol"], atol=tol["atol"], equal_nan=True)
    if close.all():
        return True, ""
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.abs(g - e) / (tol["atol"] + tol["rtol"] * np.abs(e))
    return False, f"{(~close).sum()} of {close.size} off, worst {np.nanmax(r):.3g}x the tolerance"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--axle", default=os.path.join(os.path.dirname(__file__), "../../target/release/axle"))
    ap.add_argument("--only", default="")
    ap.add_argument("--forms", default="hlo,opt")
    ap.add_argument("--axle-arg", action="append", default=[])
    a = ap.parse_args()
    man = json.load(open(os.path.join(a.data, "manifest.json")))
    only = set(filter(None, a.only.split(",")))
    bad = 0
    for case in man["cases"]:
        if only and case["name"] not in only:
            continue
        for form in a.forms.split(","):
            f = case["hlo"] if form == "hlo" else case["xla_optimized_hlo"]
            with tempfile.TemporaryDirectory() as out:
                cmd = [a.axle, "run", os.path.join(a.data, f), "--out-dir", out, "--quiet"] + a.axle_arg
                for i in case["inputs"]:
                    cmd += ["--input", os.path.join(a.data, i["file"])]
                t = time.time()
                r = subprocess.run(cmd, capture_output=True, text=True)
                dt = time.time() - t
                if r.returncode != 0:
                    bad += 1
                    print(f"{case['name']} {form}: FAILED (exit {r.returncode}): {r.stderr.strip()[-500:]}")
                    continue
                misses = []
                for k, o in enumerate(case["outputs"]):
                    exp = np.load(os.path.join(a.data, o["file"]))
                    p = os.path.join(out, f"out{k}.npy")
                    if not os.path.exists(p):
                        misses.append(f"out{k} missing")
                        continue
                    ok, why = compare(exp, np.load(p), o["tolerance"], o["dtype"])
                    if not ok:
                        misses.append(f"out{k} {o.get('name', '')}: {why}")
                n = len(case["outputs"])
                status = "ok" if not misses else "MISMATCH"
                bad += bool(misses)
                print(f"{case['name']} {form}: {status}, {n - len(misses)}/{n} outputs match ({dt:.1f} s)")
                for m in misses:
                    print(f"    {m}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
