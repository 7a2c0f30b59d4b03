#!/usr/bin/env python3
"""Axle and XLA CPU side by side on the same HLO text files, in one run.

    jaxenv/bin/python bench/xla/side_by_side.py FILE.hlo... [--axle target/release/axle]
        [--passes P] [--rounds R] [--repeat N] [--warmup W] [--xla-opt] [--dump-xla-opt DIR]
        [--json OUT] [--axle-arg ARG]...

Needs a venv with jax/jaxlib 0.10.2 and numpy (see the developers' guide). For every file and
every round, XLA and Axle are measured one after the other (interleaved, so machine noise hits
both sides alike); the table shows the median over rounds of each side's per-round median.

XLA side: the HLO text is compiled by `compile_hlo_text` of $AXLE_SHARED/baseline/baseline.py
(default ../shared)
(parse -> StableHLO -> XLA CPU), inputs are random normal values of the parameters' shapes
(integers in [0, 16)), and each run is `execute_sharded` plus waiting for the results:
- fresh: every run allocates its outputs (XLA's default);
- reused: a variant of the module takes one extra parameter per output leaf, aliased to that
  output (`input_output_alias ... may-alias`), and each run donates the previous run's outputs,
  so results land in memory that is already mapped (what shared/baseline calls "reused out");
- temp: `get_compiled_memory_stats().temp_size_in_bytes` of the plain module.
- compile: the first compile of the program in this process (every program but the first finds
  XLA's LLVM already paged in); with `--warm-compile`, also a second compile of the same text.
Axle side: `axle bench FILE --outputs both` (compile time, fresh and reused medians, temp bytes),
with `--passes P` and extra `--axle-arg`s passed through.

`--xla-opt` also runs Axle on XLA's own optimized module (`exe.hlo_modules()[0].to_string()`,
with `--passes none`, so Axle executes XLA's fusion decisions as given); `--dump-xla-opt DIR`
writes those modules as DIR/NAME.xla-opt.hlo. Ratios are Axle / XLA (below 1: Axle is faster).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "testkit"))
sys.path.insert(0, os.path.join(os.environ.get("AXLE_SHARED") or os.path.join(ROOT, "..", "shared"),
                                "baseline"))
from baseline import compile_hlo_text  # noqa: E402
from shape_list import split_top  # noqa: E402

ELEM = {
    "pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "f32": np.float32, "f64": np.float64,
}
try:  # bf16 arrays as JAX makes them (ml_dtypes ships with jaxlib)
    import ml_dtypes

    ELEM["bf16"] = ml_dtypes.bfloat16
except ImportError:
    pass


def layout_span(header):
    """(start, end) of the text inside entry_computation_layout={...} in the module header."""
    key = "entry_computation_layout={"
    i = header.find(key)
    if i < 0:
        raise ValueError("no entry_computation_layout in the module header")
    start = i + len(key)
    depth = 1
    for j in range(start, len(header)):
        if header[j] == "{":
            depth += 1
        elif header[j] == "}":
            depth -= 1
            if depth == 0:
                return start, j
    raise ValueError("unterminated entry_computation_layout")


def entry_signature(text):
    """(parameter shape strings, result shape strings, whether the result is a tuple)."""
    header = text.split("\n", 1)[0]
    a, b = layout_span(header)
    sig = re.sub(r"/\*.*?\*/", "", header[a:b])
    # "(p0, p1, ...)->result": the parameter list is the first balanced (...).
    depth = 0
    for j, ch in enumerate(sig):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                break
    params = split_top(sig[1:j])
    res = sig[j + 1:].lstrip("-> ").strip()
    results = split_top(res[1:-1]) if res.startswith("(") else [res]
    return params, results, res.startswith("(")


def parse_array_shape(s):
    s = re.sub(r"/\*.*?\*/", "", s).strip()
    m = re.match(r"(\w+)\[([^\]]*)\]", s)
    if not m:
        raise ValueError(f"not an array shape: {s}")
    dims = [int(d.lstrip("<=")) for d in m.group(2).split(",") if d.strip()]
    return m.group(1), dims


def make_inputs(params, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for p in params:
        ty, dims = parse_array_shape(p)
        if ty not in ELEM:
            raise ValueError(f"input type {ty} not supported by this harness")
        dt = ELEM[ty]
        if ty == "pred":
            out.append(rng.integers(0, 2, size=dims).astype(dt))
        elif dt is not np.bool_ and np.dtype(dt).kind in "iu":
            out.append(rng.integers(0, 16, size=dims).astype(dt))
        else:
            out.append(rng.standard_normal(dims).astype(dt))
    return out


def donated_variant(text):
    """The module with one extra entry parameter per output leaf, aliased to that output."""
    params, results, is_tuple = entry_signature(text)
    header, rest = text.split("\n", 1)
    m = re.search(r"ENTRY\s+%?([\w.\-]+)[^\n]*\{\n", rest)
    if not m:
        raise ValueError("no ENTRY computation")
    insert_at = m.end()
    lines, aliases = [], []
    for i, r in enumerate(results):
        k = len(params) + i
        lines.append(f"  sbs_donor.{i} = {r} parameter({k})\n")
        aliases.append(f"{{{i}}}: ({k}, {{}}, may-alias)" if is_tuple else f"{{}}: ({k}, {{}}, may-alias)")
    rest = rest[:insert_at] + "".join(lines) + rest[insert_at:]
    # A signature on the ENTRY line (XLA's long form) would need the new parameters too.
    if re.search(r"ENTRY\s+%?[\w.\-]+\s*\(", rest):
        raise ValueError("ENTRY with a signature: reused-output variant not supported")
    a, b = layout_span(header)
    res = ("(" + ", ".join(results) + ")") if is_tuple else results[0]
    header = header[:a] + "(" + ", ".join(params + results) + ")->" + res + header[b:]
    header += ", input_output_alias={ " + ", ".join(aliases) + " }"
    return header + "\n" + rest


def med(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def block(outs):
    for o in outs:
        o.block_until_ready()


class Xla:
    """One program compiled by XLA, with its inputs on the device."""

    def __init__(self, text, warm_compile=False):
        import jax
        self.jax = jax
        params, results, _ = entry_signature(text)
        t0 = time.perf_counter()
        self.exe = compile_hlo_text(text)
        self.compile_s = time.perf_counter() - t0
        self.compile_warm_s = None
        if warm_compile:
            t0 = time.perf_counter()
            self.exe = compile_hlo_text(text)
            self.compile_warm_s = time.perf_counter() - t0
        self.temp = self.exe.get_compiled_memory_stats().temp_size_in_bytes
        self.args = [jax.device_put(a) for a in make_inputs(params)]
        try:
            self.donor_exe = compile_hlo_text(donated_variant(text))
            self.donor_note = None
        except Exception as e:  # noqa: BLE001 - reported in the table
            self.donor_exe, self.donor_note = None, str(e).splitlines()[0][:80]
        self.donors = None

    def run_fresh(self):
        outs = self.exe.execute_sharded(self.args).disassemble_into_single_device_arrays()
        block([o[0] for o in outs])

    def run_reused(self):
        if self.donors is None:
            outs = self.exe.execute_sharded(self.args).disassemble_into_single_device_arrays()
            self.donors = [o[0] for o in outs]
        outs = self.donor_exe.execute_sharded(self.args + self.donors).disassemble_into_single_device_arrays()
        self.donors = [o[0] for o in outs]
        block(self.donors)

    def time(self, fn, repeat, warmup):
        for _ in range(warmup):
            fn()
        ts = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return med(ts) * 1e3

    def optimized_text(self):
        return self.exe.hlo_modules()[0].to_string()


def axle_bench(axle, path, passes, repeat, warmup, extra):
    cmd = [axle, "bench", path, "--repeat", str(repeat), "--warmup", str(warmup), "--outputs", "both"]
    if passes is not None:
        cmd += ["--passes", passes]
    cmd += extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0 and passes == "none" and "unknown pass 'none'" in p.stderr:
        # Before the `cpu` pipeline existed, `axle bench` ran a module as given by default.
        return axle_bench(axle, path, None, repeat, warmup, extra)
    if p.returncode != 0:
        return {"error": (p.stderr.strip() or p.stdout.strip()).splitlines()[0][:160]}
    out = p.stdout
    r = {}
    for key, pat in [("compile_ms", r"compile:\s*([\d.]+) ms"), ("temp", r"temp:\s*(\d+) bytes"),
                     ("compile_warm_ms", r"compile again \(warm\):\s*([\d.]+) ms"),
                     ("fresh_ms", r"fresh outputs\): median ([\d.]+) ms"),
                     ("reused_ms", r"reused outputs\): median ([\d.]+) ms")]:
        m = re.search(pat, out)
        if m:
            r[key] = float(m.group(1))
    return r


def fmt(x, unit=""):
    if x is None:
        return "-"
    if unit == "B":
        return f"{x / 1e6:.1f} MB" if x >= 1e5 else f"{int(x)} B"
    return f"{x:.2f}"


def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--axle", default=os.path.join(ROOT, "target", "release", "axle"))
    ap.add_argument("--passes", default=None, help="Axle pipeline (default: axle bench's default)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--xla-opt", action="store_true", help="also run Axle on XLA's optimized module")
    ap.add_argument("--dump-xla-opt", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--axle-arg", action="append", default=[])
    ap.add_argument("--warm-compile", action="store_true",
                    help="also time a second compile of each program in the same process, on both "
                         "sides (XLA compiles in this long-lived process; `axle bench` is a fresh "
                         "process, whose first compile also pages in LLVM's code)")
    a = ap.parse_args()
    if a.warm_compile:
        a.axle_arg = a.axle_arg + ["--warm-compile"]
    if not os.path.exists(a.axle):
        sys.exit(f"no axle binary at {a.axle} (cargo build --release --bin axle)")
    tmp = tempfile.mkdtemp(prefix="sbs-")
    rows = []
    for path in a.files:
        name = os.path.basename(path).split(".hlo")[0]
        text = open(path).read()
        if path.endswith(".gz"):
            import gzip
            text = gzip.open(path, "rt").read()
        print(f"# {name}", file=sys.stderr, flush=True)
        row = {"name": name}
        try:
            x = Xla(text, a.warm_compile)
        except Exception as e:  # noqa: BLE001 - reported in the table
            row["xla_error"] = str(e).splitlines()[0][:120]
            x = None
        opt_path = None
        if x is not None:
            row["xla_compile_ms"] = x.compile_s * 1e3
            if x.compile_warm_s is not None:
                row["xla_compile_warm_ms"] = x.compile_warm_s * 1e3
            row["xla_temp"] = x.temp
            if a.xla_opt or a.dump_xla_opt:
                d = a.dump_xla_opt or tmp
                os.makedirs(d, exist_ok=True)
                opt_path = os.path.join(d, name + ".xla-opt.hlo")
                open(opt_path, "w").write(x.optimized_text())
        samples = {k: [] for k in ("xf", "xr", "af", "ar", "of", "or")}
        for _ in range(a.rounds):
            if x is not None:
                samples["xf"].append(x.time(x.run_fresh, a.repeat, a.warmup))
                if x.donor_exe is not None:
                    samples["xr"].append(x.time(x.run_reused, a.repeat, a.warmup))
            ab = axle_bench(a.axle, path, a.passes, a.repeat, a.warmup, a.axle_arg)
            if "error" in ab:
                row["axle_error"] = ab["error"]
            else:
                row["axle_compile_ms"] = ab.get("compile_ms")
                row["axle_compile_warm_ms"] = ab.get("compile_warm_ms")
                row["axle_temp"] = ab.get("temp")
                samples["af"].append(ab.get("fresh_ms"))
                samples["ar"].append(ab.get("reused_ms"))
            if a.xla_opt and opt_path:
                ob = axle_bench(a.axle, opt_path, "none", a.repeat, a.warmup, a.axle_arg)
                if "error" in ob:
                    row["axle_xla_opt_error"] = ob["error"]
                else:
                    row["axle_xla_opt_temp"] = ob.get("temp")
                    samples["of"].append(ob.get("fresh_ms"))
                    samples["or"].append(ob.get("reused_ms"))
        for k, key in [("xf", "xla_fresh_ms"), ("xr", "xla_reused_ms"), ("af", "axle_fresh_ms"),
                       ("ar", "axle_reused_ms"), ("of", "axle_xla_opt_fresh_ms"),
                       ("or", "axle_xla_opt_reused_ms")]:
            vals = [v for v in samples[k] if v is not None]
            row[key] = med(vals) if vals else None
        if x is not None and x.donor_note:
            row["xla_reused_note"] = x.donor_note
        rows.append(row)
        del x
    g = lambda r, k: r.get(k)
    print("| program | XLA fresh ms | Axle fresh ms | ratio | XLA reused ms | Axle reused ms | ratio | XLA temp | Axle temp |"
          + (" Axle on XLA-opt fresh ms | ratio | reused ratio |" if a.xla_opt else ""))
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|---:|" if a.xla_opt else ""))
    for r in rows:
        line = (f"| {r['name']} | {fmt(g(r, 'xla_fresh_ms'))} | {fmt(g(r, 'axle_fresh_ms'))} | "
                f"{ratio(g(r, 'axle_fresh_ms'), g(r, 'xla_fresh_ms'))} | {fmt(g(r, 'xla_reused_ms'))} | "
                f"{fmt(g(r, 'axle_reused_ms'))} | {ratio(g(r, 'axle_reused_ms'), g(r, 'xla_reused_ms'))} | "
                f"{fmt(g(r, 'xla_temp'), 'B')} | {fmt(g(r, 'axle_temp'), 'B')} |")
        if a.xla_opt:
            line += (f" {fmt(g(r, 'axle_xla_opt_fresh_ms'))} | "
                     f"{ratio(g(r, 'axle_xla_opt_fresh_ms'), g(r, 'xla_fresh_ms'))} | "
                     f"{ratio(g(r, 'axle_xla_opt_reused_ms'), g(r, 'xla_reused_ms'))} |")
        print(line)
        for k in ("xla_error", "axle_error", "axle_xla_opt_error", "xla_reused_note"):
            if k in r:
                print(f"  {r['name']}: {k}: {r[k]}")
    fr = [r["axle_fresh_ms"] / r["xla_fresh_ms"] for r in rows if g(r, "axle_fresh_ms") and g(r, "xla_fresh_ms")]
    rr = [r["axle_reused_ms"] / r["xla_reused_ms"] for r in rows if g(r, "axle_reused_ms") and g(r, "xla_reused_ms")]
    if fr:
        print(f"geomean Axle/XLA: fresh {np.exp(np.mean(np.log(fr))):.2f}"
              + (f", reused {np.exp(np.mean(np.log(rr))):.2f}" if rr else ""))
    print()
    print("| program | XLA compile ms | Axle compile ms | ratio |"
          + (" XLA again (warm) | Axle again (warm) | ratio |" if a.warm_compile else ""))
    print("|---|---:|---:|---:|" + ("---:|---:|---:|" if a.warm_compile else ""))
    for r in rows:
        line = (f"| {r['name']} | {fmt(g(r, 'xla_compile_ms'))} | {fmt(g(r, 'axle_compile_ms'))} | "
                f"{ratio(g(r, 'axle_compile_ms'), g(r, 'xla_compile_ms'))} |")
        if a.warm_compile:
            line += (f" {fmt(g(r, 'xla_compile_warm_ms'))} | {fmt(g(r, 'axle_compile_warm_ms'))} | "
                     f"{ratio(g(r, 'axle_compile_warm_ms'), g(r, 'xla_compile_warm_ms'))} |")
        print(line)
    for key, label in [("compile_ms", "compile"), ("compile_warm_ms", "compile again (warm)")]:
        cr = [r["axle_" + key] / r["xla_" + key] for r in rows
              if g(r, "axle_" + key) and g(r, "xla_" + key)]
        if cr:
            print(f"geomean Axle/XLA {label}: {np.exp(np.mean(np.log(cr))):.2f}")
    print(f"rounds {a.rounds} x {a.repeat} runs (+{a.warmup} warm-up) per side and policy; medians; "
          f"Axle pipeline: {a.passes or 'axle bench default'}")
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
