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


def axle_temp(axle, path, args):
    """The temporary bytes `axle buffers` reports for `path`, or the error's last line."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "a.json")
        r = subprocess.run([axle, "buffers", path, "--json", out] + args,
                           capture_output=True, text=True)
        if r.returncode != 0:
            return "error: " + (r.stderr.strip().splitlines() or ["?"])[-1]
        with open(out) as f:
            return json.load(f)["temp_bytes"]


def shown(x):
    return f"{x:,}" if isinstance(x, int) else str(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--axle", default=os.path.join(ROOT, "target", "release", "axle"))
    ap.add_argument("--passes", default="cpu")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows = []
    print("| program | Axle (cpu pipeline) | Axle on XLA's module | same, XLA's rules | XLA |")
    print("|---|---:|---:|---:|---:|")
    for path in a.files:
        name = os.path.basename(path)
        with open(path) as f:
            text = f.read()
        exe = compile_hlo_text(text)
        xla = exe.get_compiled_memory_stats().temp_size_in_bytes
        row = {"name": name, "xla": xla,
               "axle": axle_temp(a.axle, path, ["--passes", a.passes, "--rules", "cpu"])}
        with tempfile.TemporaryDirectory() as d:
            opt = os.path.join(d, name + ".xla-opt.hlo")
            with open(opt, "w") as f:
                f.write(exe.hlo_modules()[0].to_string())
            row["axle-xla-opt"] = axle_temp(a.axle, opt, ["--schedule", "keep", "--rules", "cpu"])
            row["axle-xla-opt-xla-rules"] = axle_temp(
                a.axle, opt, ["--schedule", "keep", "--rules", "xla"])
        rows.append(row)
        print(f"| {name} | {shown(row['axle'])} | {shown(row.get('axle-xla-opt', '-'))} | "
              f"{shown(row.get('axle-xla-opt-xla-rules', '-'))} | {shown(xla)} |", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
