#!/usr/bin/env python3
"""Compiles one HLO text file with XLA CPU and prints one JSON line; the compile-time harness
(`axle-graphs sweep`) runs it in a fresh process per measurement.

    jaxenv/bin/python bench/xla/compile_once.py FILE.hlo[.gz]

Prints {"compile_s": ..., "import_rss_mb": ...}: `compile_s` is HLO text to executable
(parse, conversion to StableHLO, XLA CPU compile), as `compile_hlo_text` in side_by_side.py
and shared/baseline/baseline.py do; `import_rss_mb` is the peak RSS after importing jax and
before reading the file, so the caller can tell jax's own footprint from the compile's.
"""
import gzip
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from side_by_side import compile_hlo_text  # noqa: E402


def hwm_mb():
    with open("/proc/self/status") as f:
        return int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1)) / 1024


def main():
    import jax
    jax.devices("cpu")
    path = sys.argv[1]
    base = hwm_mb()
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        text = f.read()
    t0 = time.perf_counter()
    compile_hlo_text(text)
    print(json.dumps({"compile_s": time.perf_counter() - t0, "import_rss_mb": base}), flush=True)


if __name__ == "__main__":
    main()
