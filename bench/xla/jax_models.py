"""The real models of the shared data, jitted by JAX and run on XLA CPU and on Axle's PJRT plugin
side by side in one process: outputs compared within the manifest's tolerances, first-call
(trace + compile + run) and steady-state run times.

    JAX_PLATFORMS=axle,cpu python bench/xla/jax_models.py [--only a,b] [--runs 3] \\
        [--manifest DATADIR/manifest.json]

The models are `gen_models.py`'s (in $AXLE_SHARED/models): the same builders, the same seeded
inputs. Tolerances come from the generated data's manifest when one is given (per output
rtol/atol), else gen_models' defaults. The ratio columns are Axle / XLA; NaN must match NaN.
"""

import argparse
import json
import os
import statistics
import sys
import time
import zlib

import numpy as np

import jax

SHARED = os.environ.get("AXLE_SHARED", os.path.join(os.path.dirname(__file__), "../../../shared"))
sys.path.insert(0, os.path.join(SHARED, "models"))
import gen_models  # noqa: E402


def tolerances(manifest, name, n):
    if manifest:
        for c in manifest.get("cases", []):
            if c["name"] == name:
                # A dict of rtol/atol, or "exact" (integer outputs).
                return [(o["tolerance"]["rtol"], o["tolerance"]["atol"])
                        if isinstance(o["tolerance"], dict) else (0.0, 0.0)
                        for o in c["outputs"]]
    case = next(c for c in gen_models.CASES if c["name"] == name)
    return [case["tol"]] * n


def worst(ref, got, rtol, atol):
    ref = np.asarray(ref, np.float64) if ref.dtype.kind in "fcV" or ref.dtype.name == "bfloat16" else np.asarray(ref)
    got = np.asarray(got, ref.dtype)
    if ref.dtype.kind not in "fc":
        return 0.0 if np.array_equal(ref, got) else float("inf")
    nan = np.isnan(ref) | np.isnan(got)
    if np.any(np.isnan(ref) != np.isnan(got)):
        return float("inf")
    err = np.abs(ref - got)[~nan]
    lim = (atol + rtol * np.abs(ref))[~nan]
    return float(np.max(err / lim)) if err.size else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--manifest", default=None)
    a = ap.parse_args()
    manifest = json.load(open(a.manifest)) if a.manifest else None
    only = [x for x in a.only.split(",") if x]
    devs = {"xla": jax.devices("cpu")[0], "axle": jax.devices("axle")[0]}
    print(f"{'model':<26} {'ok':<4} {'worst/tol':>9} {'xla first':>10} {'axle first':>10} "
          f"{'ratio':>6} {'xla run':>9} {'axle run':>9} {'ratio':>6}")
    failed = 0
    for c in gen_models.CASES:
        name = c["name"]
        if only and name not in only:
            continue
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        spec = c["build"](rng)
        names = [n for n, _ in spec["inputs"]]
        host = [np.asarray(x) for _, x in spec["inputs"]]
        f = spec["f"]
        outs, first, run = {}, {}, {}
        for k, d in devs.items():
            args = [jax.device_put(x, d) for x in host]
            fn = jax.jit(lambda *xs: f(dict(zip(names, xs))), keep_unused=True)
            t0 = time.perf_counter()
            o = jax.block_until_ready(fn(*args))
            first[k] = time.perf_counter() - t0
            ts = []
            for _ in range(a.runs):
                t0 = time.perf_counter()
                jax.block_until_ready(fn(*args))
                ts.append(time.perf_counter() - t0)
            run[k] = statistics.median(ts)
            outs[k] = [np.asarray(x) for x in jax.tree_util.tree_leaves(o)]
            del args
        tols = tolerances(manifest, name, len(outs["xla"]))
        w = max(worst(r, g, rt, at) for r, g, (rt, at) in zip(outs["xla"], outs["axle"], tols))
        ok = w <= 1.0
        failed += not ok
        print(f"{name:<26} {'yes' if ok else 'NO':<4} {w:>9.3f} {first['xla']:>9.2f}s {first['axle']:>9.2f}s "
              f"{first['axle'] / first['xla']:>6.2f} {run['xla'] * 1e3:>7.1f}ms {run['axle'] * 1e3:>7.1f}ms "
              f"{run['axle'] / run['xla']:>6.2f}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
