#!/usr/bin/env python3
"""Temporary bytes of Axle's buffer assignment and of XLA CPU on the same HLO files, in one run.

    jaxenv/bin/python bench/xla/temp_bytes.py FILE.hlo... [--axle target/release/axle]
        [--passes cpu] [--json OUT]

XLA: `get_compiled_memory_stats().temp_size_in_bytes` of the module compiled as
`side_by_side.py` (and shared/baseline/baseline.py) compiles it. Axle, from `axle buffers`:
- `axle`: the file after `--passes` (default: the cpu backend's default pipeline `cpu`),
  scheduled (best) and assigned under the cpu backend's rules: the temporary block `axle bench`
  reports and the backend runs on;
- `axle-xla-opt`, `axle-xla-opt-xla-rules`: XLA's optimized module of the same compilation
  (`exe.hlo_modules()[0].to_string()`) with XLA's own schedule kept, under the cpu backend's
  rules and under XLA's (every fusion one kernel, no scratch): the same fusion decisions and
  the same schedule on both sides, so only the assignment differs.
Needs no timing, so it runs as fast as the compilers do.

`--baseline` adds the 11 programs of shared/baseline (baseline.json), `--corpus` every case of
shared/corpus (its `NAME.hlo`, not the stored `NAME.opt.hlo`). The `arena` column is the
scratch arena of the default pipeline's assignment: GEMM packing and sort planes, which the
cpu runtime provides beside the temporary block, as XLA's runtime lets Eigen and `std::sort`
allocate theirs outside `temp_size_in_bytes`. Rows where an Axle column exceeds XLA are listed
at the end.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from side_by_side import compile_hlo_text  # noqa: E402


def axle_report(axle, path, args):
    """The JSON report of `axle buffers` for `path`, or the error's last line."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "a.json")
        r = subprocess.run([axle, "buffers", path, "--json", out] + args,
                           capture_output=True, text=True)
        if r.returncode != 0:
            return "error: " + (r.stderr.strip().splitlines() or ["?"])[-1]
        with open(out) as f:
            return json.load(f)


def axle_temp(axle, path, args):
    """The temporary bytes `axle buffers` reports for `path`, or the error's last line."""
    r = axle_report(axle, path, args)
    return r if isinstance(r, str) else r["temp_bytes"]


def shared_dir():
    return os.environ.get("AXLE_SHARED", "/work/shared")


def baseline_files():
    """The baseline programs' HLO files, in baseline.json's order."""
    d = os.path.join(shared_dir(), "baseline")
    with open(os.path.join(d, "baseline.json")) as f:
        names = [p["name"] for p in json.load(f)["programs"]]
    return [os.path.join(d, n + ".hlo") for n in names]


def corpus_files():
    """Every corpus case's own HLO file, sorted."""
    d = os.path.join(shared_dir(), "corpus")
    return sorted(os.path.join(d, f) for f in os.listdir(d)
                  if f.endswith(".hlo") and not f.endswith(".opt.hlo"))


def shown(x):
    return f"{x:,}" if isinstance(x, int) else str(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*")
    ap.add_argument("--baseline", action="store_true", help="add shared/baseline's programs")
    ap.add_argument("--corpus", action="store_true", help="add shared/corpus's cases")
    ap.add_argument("--axle", default=os.path.join(ROOT, "target", "release", "axle"))
    ap.add_argument("--passes", default="cpu")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    files = list(a.files)
    if a.baseline:
        files += baseline_files()
    if a.corpus:
        files += corpus_files()
    if not files:
        ap.error("no files (give some, or --baseline / --corpus)")
    rows = []
    print("| program | Axle (cpu pipeline) | arena | Axle on XLA's module | same, XLA's rules "
          "| XLA |")
    print("|---|---:|---:|---:|---:|---:|")
    for path in files:
        name = os.path.basename(path)
        with open(path) as f:
            text = f.read()
        try:
            exe = compile_hlo_text(text)
        except Exception as e:  # noqa: BLE001 (XLA refuses some cases: say so, go on)
            line = (str(e).strip().splitlines() or ["?"])[0]
            print(f"| {name} | XLA error: {line[:120]} |", flush=True)
            rows.append({"name": name, "xla": "error: " + line})
            continue
        xla = exe.get_compiled_memory_stats().temp_size_in_bytes
        rep = axle_report(a.axle, path, ["--passes", a.passes, "--rules", "cpu"])
        row = {"name": name, "xla": xla,
               "axle": rep if isinstance(rep, str) else rep["temp_bytes"],
               "arena": "-" if isinstance(rep, str) else rep.get("arena_bytes", 0)}
        with tempfile.TemporaryDirectory() as d:
            opt = os.path.join(d, name + ".xla-opt.hlo")
            with open(opt, "w") as f:
                f.write(exe.hlo_modules()[0].to_string())
            # XLA prints large constants elided; their values do not change any size.
            keep = ["--schedule", "keep", "--elided-constants", "zeros"]
            row["axle-xla-opt"] = axle_temp(a.axle, opt, keep + ["--rules", "cpu"])
            row["axle-xla-opt-xla-rules"] = axle_temp(a.axle, opt, keep + ["--rules", "xla"])
        rows.append(row)
        print(f"| {name} | {shown(row['axle'])} | {shown(row['arena'])} | "
              f"{shown(row.get('axle-xla-opt', '-'))} | "
              f"{shown(row.get('axle-xla-opt-xla-rules', '-'))} | {shown(xla)} |", flush=True)
    over = [(r["name"], k) for r in rows for k in ("axle", "axle-xla-opt")
            if isinstance(r.get(k), int) and isinstance(r["xla"], int) and r[k] > r["xla"]]
    print(f"\n{len(over)} Axle figures above XLA's" + (":" if over else "."))
    for name, k in over:
        print(f"  {name}: {k}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
