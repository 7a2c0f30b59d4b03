"""The pass-ordering leaderboard: every search of :mod:`axle.gym.baselines` on a dataset's test
split, scored by the geometric mean over benchmarks of the speed-up over the backend's default
pipeline, written as a Markdown table.

``python -m axle.gym.leaderboard --dataset corpus --split test --budget 200 --score runtime``

Searches minimize ``--search-metric`` (the cheap ``cost`` by default) within ``--budget`` pass
applications; the best sequence each finds is then replayed and scored by ``--score``
(``runtime``: measured as :class:`~axle.gym.RuntimeConfig` says, the default's module and the
methods' in ``--rounds`` interleaved rounds after the searches, so load that drifts during a
run does not favour one method; or ``cost``/``insts``). The
speed-up of a method on a benchmark is ``score(default pipeline) / score(method)``; above 1
beats the default. ``--validate`` checks every final module with the evaluator.
"""

import argparse
import math
import sys
import time

import numpy as np

from .. import AxleError
from . import baselines, datasets
from .env import AxleEnv, RuntimeConfig

__all__ = ["cli", "run", "markdown", "main"]


def _geomean(xs):
    xs = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def _interleaved(modules, config, seed, rounds):
    """Median run time of each module (None stays None) over ``rounds`` rounds that measure
    every distinct module (by hash) once each, uncached; equal modules share their time."""
    keys = [None if m is None else m.hash() for m in modules]
    distinct = {}
    for k, m in zip(keys, modules):
        if m is not None and k not in distinct:
            distinct[k] = m
    meds = {k: [] for k in distinct}
    for _ in range(rounds):
        for k, m in distinct.items():
            _, t = m.measure(config.backend, config.threads, config.warmup, config.repeat, seed)
            meds[k].append(float(np.median(t)))
    return [None if k is None else float(np.median(meds[k])) for k in keys]


def run(uris, methods=("default", "random", "greedy", "evolution"), budget=200, seed=0,
        search_metric="cost", score="runtime", runtime=None, validate=False, log=None,
        rounds=3):
    """Runs ``methods`` on every benchmark of ``uris``; returns one dict per (benchmark,
    method): ``benchmark``, ``method``, ``actions``, ``score`` (the method's), ``baseline``
    (the default pipeline's), ``speedup``, ``valid`` (None unless ``validate``), ``seconds``,
    ``steps`` and ``error`` (a message when the search failed, else None). Run-time scores
    are measured after the searches, the default's module and every method's in ``rounds``
    interleaved rounds, each the median of its rounds' medians."""
    rows = []
    for uri in uris:
        env = AxleEnv(uri, reward_space=search_metric, runtime=runtime)
        try:
            env.reset(seed=seed)
            # Run times are measured after the searches (below).
            base = env.baseline(score) if score != "runtime" else None
        except AxleError as e:
            if log:
                print(f"{uri}: skipped ({str(e).splitlines()[0]})", file=log)
            continue
        bench_rows, modules = [], []
        for name in methods:
            row = {"benchmark": uri, "method": name, "actions": (), "score": None,
                   "baseline": base, "speedup": None, "valid": None, "seconds": 0.0,
                   "steps": 0, "error": None}
            try:
                r = baselines.SEARCHES[name](env, metric=search_metric, budget=budget, seed=seed)
                env.replay(r.state)
                row.update(actions=r.actions, seconds=r.seconds, steps=r.steps,
                           score=env.metric(score) if score != "runtime" else None)
                modules.append(env._require_module().copy())
                if validate:
                    row["valid"] = env.validate().ok
            except AxleError as e:
                row["error"] = str(e).splitlines()[0]
                modules.append(None)
            bench_rows.append(row)
        if score == "runtime":
            # Run times drift with the machine's load: the default's module and every method's
            # are measured again in interleaved rounds, and each scored by its median.
            env.reset(seed=seed)
            try:
                default = env._require_module().copy()
                default.apply(env.baseline_pipeline)
                times = _interleaved([default] + modules, env.runtime_config, seed, rounds)
                base = times[0]
                for row, t in zip(bench_rows, times[1:]):
                    row["baseline"] = base
                    if t is not None:
                        row["score"] = t
            except AxleError as e:
                for row in bench_rows:
                    row["error"] = row["error"] or str(e).splitlines()[0]
        for row in bench_rows:
            if row["error"] is None:
                v = row["score"]
                row["speedup"] = row["baseline"] / v if v and v > 0 else None
            rows.append(row)
            if log:
                s = ("error: " + row["error"] if row["error"] else
                     f"{row['speedup']:.3f}x" if row["speedup"] else "no score")
                print(f"{uri:45s} {row['method']:10s} {s}  ({row['seconds']:.1f}s, "
                      f"{row['steps']} steps)", file=log)
        env.close()
    return rows


def markdown(rows, score="runtime", methods=None):
    """The leaderboard (one row per method, best geomean first) and the per-benchmark
    speed-ups, as Markdown."""
    methods = methods or list(dict.fromkeys(r["method"] for r in rows))
    lines = [f"| method | geomean speed-up over default ({score}) | better / worse than default "
             "| valid | errors | search seconds (mean) | pass applications (mean) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    table = []
    for m in methods:
        rs = [r for r in rows if r["method"] == m]
        ok = [r for r in rs if r["error"] is None]
        g = _geomean([r["speedup"] for r in ok])
        better = sum(1 for r in ok if r["speedup"] and r["speedup"] > 1.02)
        worse = sum(1 for r in ok if r["speedup"] and r["speedup"] < 0.98)
        checked = [r for r in ok if r["valid"] is not None]
        valid = f"{sum(r['valid'] for r in checked)}/{len(checked)}" if checked else "-"
        secs = sum(r["seconds"] for r in ok) / len(ok) if ok else 0.0
        steps = sum(r["steps"] for r in ok) / len(ok) if ok else 0.0
        table.append((g, f"| {m} | {g:.3f} | {better} / {worse} | {valid} | "
                         f"{len(rs) - len(ok)} | {secs:.1f} | {steps:.0f} |"))
    table.sort(key=lambda x: -x[0] if math.isfinite(x[0]) else math.inf)
    lines += [t for _, t in table]
    uris = list(dict.fromkeys(r["benchmark"] for r in rows))
    lines += ["", "| benchmark | " + " | ".join(methods) + " |",
              "|---|" + "---:|" * len(methods)]
    for u in uris:
        cells = []
        for m in methods:
            r = next((r for r in rows if r["benchmark"] == u and r["method"] == m), None)
            if r is None or r["error"] or r["speedup"] is None:
                cells.append("error" if r else "")
            else:
                cells.append(f"{r['speedup']:.3f}")
        lines.append(f"| {u} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    """The command line (see the module docs)."""
    p = argparse.ArgumentParser(prog="python -m axle.gym.leaderboard", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="corpus",
                   help="corpus, models, generated, large, or a dump directory")
    p.add_argument("--split", default="test", choices=["train", "test", "all"])
    p.add_argument("--limit", type=int, default=None, help="the first N benchmarks only")
    p.add_argument("--methods", default="default,random,greedy,evolution")
    p.add_argument("--budget", type=int, default=200, help="pass applications per search")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--search-metric", default="cost", choices=["insts", "cost", "runtime"])
    p.add_argument("--score", default="runtime", choices=["insts", "cost", "runtime"])
    p.add_argument("--threads", type=int, default=1, help="threads per measured run")
    p.add_argument("--repeat", type=int, default=7, help="timed runs per measurement")
    p.add_argument("--warmup", type=int, default=2, help="untimed runs before them")
    p.add_argument("--rounds", type=int, default=3, help="interleaved measurement rounds of "
                   "the final modules (run-time score)")
    p.add_argument("--validate", action="store_true", help="check final modules with the "
                   "evaluator")
    p.add_argument("--out", default=None, help="write the Markdown table here too")
    a = p.parse_args(argv)
    methods = [m.strip() for m in a.methods.split(",") if m.strip()]
    for m in methods:
        if m not in baselines.SEARCHES:
            p.error(f"unknown method {m!r}: one of {', '.join(baselines.SEARCHES)}")
    uris = datasets.dataset(a.dataset).uris(None if a.split == "all" else a.split)
    if a.limit is not None:
        uris = uris[: a.limit]
    cfg = RuntimeConfig(threads=a.threads, repeat=a.repeat, warmup=a.warmup)
    t = time.perf_counter()
    rows = run(uris, methods, a.budget, a.seed, a.search_metric, a.score, cfg, a.validate,
               log=sys.stderr, rounds=a.rounds)
    md = (f"{a.dataset} ({a.split} split, {len(uris)} benchmarks), budget {a.budget} pass "
          f"applications, searching on {a.search_metric}, scored by {a.score}"
          + (f" ({cfg.threads} thread, median of {cfg.repeat} after {cfg.warmup} warm-up, "
             f"final modules in {a.rounds} interleaved rounds)" if a.score == "runtime" else "")
          + f", seed {a.seed}, {time.perf_counter() - t:.0f} s in all\n\n"
          + markdown(rows, a.score, methods))
    print(md)
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
