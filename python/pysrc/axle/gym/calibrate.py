"""The cost model checked against measurement, and its constants fitted on this host.

``python -m axle.gym.calibrate [--datasets corpus,models] [--out FILE.md]``

Every benchmark is optimized by the cpu pipeline and compiled; every kernel is timed
(``axle._axle.kernel_costs``: one thread, the mean over ``repeat`` profiled runs after
``warmup``) and paired with the cost model's flops, transcendentals and bytes for the
instruction it computes (a fusion adds its fused computation's arithmetic). The prediction with
the default constants is the cpu fusion target's ``flops + 11 transcendentals + 6 bytes``; the
calibrated one is ``w_flop flops + w_trans transcendentals + w_byte bytes + w_call calls`` in
seconds, with non-negative weights fitted to the train split's kernels by least squares on the
logarithm of the time, every benchmark weighing the same (:func:`fit`).
The report gives the Spearman rank correlation of predicted and measured kernel time on the
train split, on the held-out test split and on all kernels, before and after calibration, and
per kernel kind (``loop``, ``gemm``, ``row``, ...) where the calibrated model is worst.

The weights are stored per host in ``$AXLE_CALIBRATION_DIR`` (default
``~/.cache/axle/calibration``) as ``HOSTNAME.json``; :func:`load` reads them, and
``AxleEnv(cost_weights=load())`` uses them for the ``cost`` metric.
"""

import argparse
import json
import math
import os
import pathlib
import socket
import sys
import time

import numpy as np

from .. import AxleError
from .. import _axle
from . import datasets

__all__ = ["cli", "fit", "kernel_rows", "load", "main", "predict", "save", "spearman"]

TERMS = ("flops", "transcendentals", "bytes", "calls")


def kernel_rows(uris, pipeline="cpu", threads=1, warmup=2, repeat=5, seed=0, log=None):
    """One dict per timed kernel of every benchmark: ``benchmark``, ``split``, ``kernel``,
    ``kind`` (the code generator's kernel kind), ``detail``, ``calls`` (per run), ``seconds``
    (per run), ``flops``, ``transcendentals``, ``bytes`` (predicted, per run). Kernels whose
    instruction the cost model does not see are left out; benchmarks that fail are logged."""
    rows = []
    for uri in uris:
        b = datasets.benchmark(uri)
        try:
            ks = _axle.kernel_costs(b.hlo_text(), pipeline, threads, warmup, repeat, seed)
        except AxleError as e:
            if log:
                print(f"{uri}: skipped ({str(e).splitlines()[0]})", file=log)
            continue
        n = 0
        for name, detail, calls, secs, fl, tr, by in ks:
            if math.isnan(fl) or secs <= 0:
                continue
            rows.append({"benchmark": uri, "split": b.split, "kernel": name,
                         "kind": detail.split(":", 1)[0].strip() or "?", "detail": detail,
                         "calls": calls, "seconds": secs, "flops": fl, "transcendentals": tr,
                         "bytes": by})
            n += 1
        if log:
            print(f"{uri}: {n} kernels", file=log)
    return rows


def _ranks(x):
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(len(x), dtype=float)
    # Ties get their mean rank.
    _, inv, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inv, weights=r)
    return sums[inv] / counts[inv]


def spearman(x, y):
    """Spearman's rank correlation of ``x`` and ``y`` (ties at their mean rank); NaN for
    fewer than three points or a constant side."""
    if len(x) < 3:
        return float("nan")
    rx, ry = _ranks(x), _ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def _x(rows):
    return np.array([[r[t] for t in TERMS] for r in rows], dtype=float)


def default_prediction(rows):
    """The default constants' predictions (in flop equivalents)."""
    x = _x(rows)
    return x[:, 0] + 11.0 * x[:, 1] + 6.0 * x[:, 2]


def predict(rows, weights):
    """Predicted seconds of each kernel with ``weights`` (per flop, transcendental, byte,
    call)."""
    return _x(rows) @ np.asarray(weights, dtype=float)


def fit(rows, iterations=200):
    """Non-negative weights (per flop, transcendental, byte, call) minimizing the squared error
    of the logarithm of the predicted kernel times on ``rows``, each benchmark weighing the
    same whatever its number of kernels (Levenberg-Marquardt on the logarithms of the
    weights; a term no kernel has keeps weight 0)."""
    if not rows:
        raise AxleError("no kernels to fit")
    t = np.array([r["seconds"] for r in rows])
    x = _x(rows)
    counts = {}
    for r in rows:
        counts[r.get("benchmark")] = counts.get(r.get("benchmark"), 0) + 1
    sw = np.sqrt(np.array([1.0 / counts[r.get("benchmark")] for r in rows]))
    used = np.array([np.any(x[:, j] > 0) for j in range(x.shape[1])])
    xs = x[:, used]
    # Start with each term explaining a quarter of the median time.
    theta = np.array([math.log(np.median(t) / 4 / np.median(c[c > 0])) for c in xs.T])
    lam = 1e-3

    def residual(th):
        p = xs @ np.exp(th)
        return sw * (np.log(np.maximum(p, 1e-300)) - np.log(t)), p

    r, p = residual(theta)
    cost = float(r @ r)
    for _ in range(iterations):
        w = np.exp(theta)
        jac = sw[:, None] * xs * w[None, :] / np.maximum(p, 1e-300)[:, None]
        g = jac.T @ r
        h = jac.T @ jac
        step = np.linalg.solve(h + lam * np.diag(np.diag(h) + 1e-12), -g)
        r2, p2 = residual(theta + step)
        c2 = float(r2 @ r2)
        if c2 < cost:
            theta, r, p = theta + step, r2, p2
            lam = max(lam / 3, 1e-9)
            if cost - c2 < 1e-12 * max(cost, 1.0):
                cost = c2
                break
            cost = c2
        else:
            lam *= 4
            if lam > 1e12:
                break
    out = np.zeros(x.shape[1])
    out[used] = np.exp(theta)
    return tuple(float(v) for v in out)


def _dir():
    return pathlib.Path(os.environ.get("AXLE_CALIBRATION_DIR",
                                       pathlib.Path.home() / ".cache" / "axle" / "calibration"))


def save(weights, info=None, host=None):
    """Stores ``weights`` (and ``info``) for ``host`` (default: this one); returns the path."""
    d = _dir()
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{host or socket.gethostname()}.json"
    p.write_text(json.dumps({"weights": dict(zip(TERMS, weights)), **(info or {})}, indent=1))
    return p


def load(host=None):
    """The weights stored for ``host`` (default: this one), or None when it has none."""
    p = _dir() / f"{host or socket.gethostname()}.json"
    if not p.is_file():
        return None
    try:
        w = json.loads(p.read_text())["weights"]
        return tuple(float(w[t]) for t in TERMS)
    except (OSError, ValueError, KeyError) as e:
        raise AxleError(f"calibration file {p} is not readable: {e}") from None


def report(rows, weights):
    """The Markdown report of ``rows`` with the fitted ``weights``."""
    out = ["| kernels | count | Spearman, default constants | Spearman, calibrated |",
           "|---|---:|---:|---:|"]
    for label, sel in [("train split (fitted on)", [r for r in rows if r["split"] == "train"]),
                       ("test split (held out)", [r for r in rows if r["split"] == "test"]),
                       ("all", rows)]:
        t = [r["seconds"] for r in sel]
        out.append(f"| {label} | {len(sel)} | {spearman(default_prediction(sel), t):.3f} | "
                   f"{spearman(predict(sel, weights), t):.3f} |" if sel else
                   f"| {label} | 0 | - | - |")
    for ds in sorted({r["benchmark"].split("/", 1)[0] for r in rows}):
        sel = [r for r in rows if r["benchmark"].startswith(ds + "/")]
        t = [r["seconds"] for r in sel]
        out.append(f"| {ds} | {len(sel)} | {spearman(default_prediction(sel), t):.3f} | "
                   f"{spearman(predict(sel, weights), t):.3f} |")
    w = dict(zip(TERMS, weights))
    out += ["", "Fitted weights (seconds): " + ", ".join(f"{k} {v:.3g}" for k, v in w.items())
            + (f"; a byte costs {w['bytes'] / w['flops']:.2f} flops and a transcendental "
               f"{w['transcendentals'] / w['flops']:.2f} more than a flop (defaults 6 and 11)"
               if w["flops"] > 0 else "") + ".", "",
            "| kernel kind | count | Spearman, calibrated | measured / predicted, median | "
            "10th-90th percentile |", "|---|---:|---:|---:|---:|"]
    kinds = []
    for kind in sorted({r["kind"] for r in rows}):
        sel = [r for r in rows if r["kind"] == kind]
        t = np.array([r["seconds"] for r in sel])
        p = predict(sel, weights)
        ratio = t / np.where(p > 0, p, np.nan)
        ratio = ratio[np.isfinite(ratio)]
        med = float(np.median(ratio)) if len(ratio) else float("nan")
        lo, hi = (np.percentile(ratio, [10, 90]) if len(ratio) else (math.nan, math.nan))
        kinds.append((abs(math.log(med)) if med > 0 else math.inf, kind, len(sel),
                      spearman(p, t), med, lo, hi))
    for _, kind, n, s, med, lo, hi in sorted(kinds, reverse=True):
        out.append(f"| {kind} | {n} | {s:.3f} | {med:.3g} | {lo:.3g} - {hi:.3g} |")
    return "\n".join(out) + "\n"


def main(argv=None):
    """The command line (see the module docs)."""
    p = argparse.ArgumentParser(prog="python -m axle.gym.calibrate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="corpus,models")
    p.add_argument("--limit", type=int, default=None, help="the first N benchmarks per dataset")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-save", action="store_true", help="do not store the weights")
    p.add_argument("--out", default=None, help="write the Markdown report here too")
    p.add_argument("--save-rows", default=None, help="write the measured kernels as JSON here")
    p.add_argument("--rows", default=None, help="fit and report the kernels of a --save-rows "
                   "file instead of measuring")
    a = p.parse_args(argv)
    uris = []
    for ds in a.datasets.split(","):
        u = datasets.dataset(ds.strip()).uris()
        uris += u[: a.limit] if a.limit else u
    t = time.perf_counter()
    if a.rows:
        rows = json.loads(pathlib.Path(a.rows).read_text())
    else:
        rows = kernel_rows(uris, threads=a.threads, warmup=a.warmup, repeat=a.repeat,
                           log=sys.stderr)
    if a.save_rows:
        pathlib.Path(a.save_rows).write_text(json.dumps(rows))
    train = [r for r in rows if r["split"] == "train"]
    weights = fit(train or rows)
    md = (f"{len(rows)} kernels of {len(uris)} benchmarks ({a.datasets}), {a.threads} thread, "
          f"mean of {a.repeat} profiled runs after {a.warmup} warm-up, "
          f"{time.perf_counter() - t:.0f} s\n\n" + report(rows, weights))
    print(md)
    if not a.no_save:
        path = save(weights, {"kernels": len(rows), "datasets": a.datasets,
                              "date": time.strftime("%Y-%m-%d")})
        print(f"weights stored in {path}")
    if a.out:
        with open(a.out, "w") as f:
            f.write(md)
    return 0


def cli(argv=None):
    """:func:`main`, with an Axle error printed as one line and exit status 2."""
    try:
        return main(argv)
    except AxleError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(cli())
