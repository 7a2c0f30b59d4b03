#!/usr/bin/env python3
"""Extracts the HLO modules that XLA's own tests hold as C++ raw strings.

Usage: extract.py XLA_DIR OUT_JSON [--with-passes]

Reads the test files SOURCES names under XLA_DIR (a checkout of openxla/xla: `xla/tests/*.cc`,
the evaluator's, the parser's and the HLO passes' tests), finds every raw string literal (`R"(...)"`, `R"delim(...)delim"`) whose text
holds `ENTRY`, and writes one record per module: a name (`FILE_STEM_K`, K counting the modules
of that file from 0), its origin (file and line of the literal) and its text. Templates the C++
fills at run time (`$name` substitutions, `%s`/`%d` formats) are listed as skipped with that
reason, so the count of what was left out is visible.

A module with collectives (or `replica-id`/`partition-id`) that its test runs on several
devices also records `replicas` and `partitions`: the module header's `replica_count` /
`num_partitions` where it has them, else what the enclosing test (from its `TEST...(` line to
the next) passes as `replica_count` / `num_replicas` / `num_partitions` (a constant such as
`kNumReplicas` is looked up in the test, then in the file; `num_devices()` counts as
ALL_DEVICES). A pass test's module (its test never runs it) with collectives runs on the devices
its collectives name (see `layout`); one whose collectives' shapes depend on a device count it
does not name is skipped with that reason. gen.py runs such a module on that many XLA CPU
devices.
"""
import glob
import json
import os
import re
import sys

# (glob under XLA_DIR, prefix of its modules' names, whether its tests execute the modules,
# whether the corpus holds it by default): XLA's execution tests and the evaluator's (which run
# their modules, on the devices the test names), the parser's and the HLO passes' tests
# (target-independent, CPU and GPU; they only transform their modules, so a module's devices are
# read from its collectives). A CPU or GPU pass test's file may share its name with a
# target-independent one, hence the prefix. The passes' tests are read with `--with-passes`
# (README.md: what they give and why the corpus does not hold them yet).
SOURCES = [
    ("xla/tests/*.cc", "", True, True),
    ("xla/hlo/evaluator/hlo_evaluator_test.cc", "", True, True),
    ("xla/hlo/parser/hlo_parser_test.cc", "", False, True),
    ("xla/hlo/transforms/**/*_test.cc", "", False, False),
    ("xla/service/*_test.cc", "", False, False),
    ("xla/service/cpu/*_test.cc", "cpu_", False, False),
    ("xla/backends/cpu/transforms/**/*_test.cc", "cpu_", False, False),
    ("xla/service/gpu/transforms/**/*_test.cc", "gpu_", False, False),
]
# Device ids a collective names: explicit replica groups and source-target pairs, and the iota
# form of replica groups (`[groups,size]<=[n...]`, over n... devices).
ID_LISTS = re.compile(r"\b(?:replica_groups|source_target_pairs)=\{([0-9,{}\s]*)\}")
IOTA_GROUPS = re.compile(r"\breplica_groups=\[[0-9,]+\]<=\[([0-9,]+)\]")
# Collectives whose result shape depends on the size of a group (an empty `{}` group list is
# every device: its size is the device count, which a pass test does not give).
SIZED = re.compile(r"\b(?:all-gather|reduce-scatter|all-to-all)(?:-start)?\(")

RAW = re.compile(r'R"([^()\\ ]{0,16})\(')
# absl::Substitute (`$0`, `$name`) and absl::StrFormat (`%s`, `%d`, ...) placeholders; an HLO
# name sigil (`%sum`, `%d.1`) goes on with a name character, a format does not.
# Instructions whose meaning depends on the devices a module runs on.
COLLECTIVE = re.compile(r"\b(?:replica-id|partition-id|all-reduce|all-gather|reduce-scatter|"
                        r"all-to-all|collective-permute|collective-broadcast)\b")
# The start of a gtest test.
TEST_START = re.compile(r"^\s*(?:XLA_)?TEST(?:_F|_P)?\(", re.M)
# Devices a test that asks for all of them (`num_devices()`) runs on here.
ALL_DEVICES = 4
# Where a test names its replica and partition counts (the value is a number, a constant or
# `num_devices()`).
VALUE = r"(\d+|[A-Za-z_]\w*(?:\(\))?)"
REPLICAS = [r"replica_count=\*/\s*" + VALUE, r"num_replicas=\*/\s*" + VALUE,
            r"CreateExecutable\(\s*\w+\s*,\s*" + VALUE + r"\s*\)",
            r"ExecuteReplicated\(\s*executable\.get\(\)\s*,\s*" + VALUE]
PARTITIONS = [r"num_partitions=\*/\s*" + VALUE, r"set_num_partitions\(\s*" + VALUE]
PLACEHOLDER = re.compile(r"\$[A-Za-z0-9_{]|%(?:l{0,2}[sduvfg])(?![A-Za-z0-9_.\-])")


def raw_strings(src):
    """(line, text) of every raw string literal in C++ source text."""
    pos = 0
    while True:
        m = RAW.search(src, pos)
        if not m:
            return
        # Skip a match inside an identifier (e.g. `FOOR"(`): a raw string starts a token.
        if m.start() > 0 and (src[m.start() - 1].isalnum() or src[m.start() - 1] == "_"):
            pos = m.end()
            continue
        end = src.find(")" + m.group(1) + '"', m.end())
        if end < 0:
            return
        yield src.count("\n", 0, m.start()) + 1, src[m.end():end]
        pos = end + len(m.group(1)) + 2


def test_body(src, line):
    """The text of the test holding `line`: from its `TEST...(` line to the next one's."""
    starts = [src.count("\n", 0, m.start()) + 1 for m in TEST_START.finditer(src)]
    lines = src.splitlines()
    lo = max([s for s in starts if s <= line], default=1)
    hi = min([s for s in starts if s > line], default=len(lines) + 1)
    return "\n".join(lines[lo - 1:hi - 1])


def count(body, src, patterns):
    """The first count `patterns` find in the test body, resolved to a number (or None)."""
    for p in patterns:
        m = re.search(p, body)
        if not m:
            continue
        v = m.group(1)
        if v.isdigit():
            return int(v)
        if v == "num_devices()":
            return ALL_DEVICES
        c = (re.search(r"\b" + re.escape(v) + r"\s*=\s*(\d+)\s*;", body) or
             re.search(r"\b" + re.escape(v) + r"\s*=\s*(\d+)\s*;", src))
        if c:
            return int(c.group(1))
    return None


def named_devices(text):
    """How many devices a module's collectives name (the largest id + 1; an iota group list
    counts its devices), 1 when they name none."""
    n = 1
    for ids in ID_LISTS.findall(text):
        n = max([n] + [int(i) + 1 for i in re.findall(r"\d+", ids)])
    for dims in IOTA_GROUPS.findall(text):
        size = 1
        for d in dims.split(","):
            size *= int(d)
        n = max(n, size)
    return n


def layout(text, src, line, executed):
    """(replicas, partitions) a module with collectives runs on, or None for one device.

    A module runs where its header or its test says. A pass test's module that neither counts
    runs on the devices its collectives name: as partitions when a collective-permute has a
    channel (XLA's cross-partition form), else as replicas. Raises ValueError for a pass test's
    module whose group sizes are the device count (`{}` groups on an all-gather, a
    reduce-scatter or an all-to-all), which its test does not give."""
    if not COLLECTIVE.search(text):
        return None
    header = text.splitlines()[0] if text.startswith("HloModule") else ""
    hr = re.search(r"\breplica_count=(\d+)", header)
    hp = re.search(r"\bnum_partitions=(\d+)", header)
    if hr or hp:
        r, p = int(hr.group(1)) if hr else 1, int(hp.group(1)) if hp else 1
    else:
        body = test_body(src, line)
        r, p = count(body, src, REPLICAS), count(body, src, PARTITIONS)
        r, p = (r or 1, p or 1) if executed or r or p else (None, None)
    if r is None:
        if SIZED.search(text) and re.search(r"\breplica_groups=\{\}", text):
            raise ValueError("collectives over every device ({} groups) that change shapes, in "
                             "a pass test, which gives no device count")
        n = named_devices(text)
        permute = re.search(r"collective-permute(?:-start)?\([^\n]*\bchannel_id=", text)
        r, p = (1, n) if permute else (n, 1)
    return (r, p) if r * p > 1 else None


def main():
    xla, out = sys.argv[1], sys.argv[2]
    passes = "--with-passes" in sys.argv[3:]
    files = sorted((f, prefix, executed) for pat, prefix, executed, default in SOURCES
                   if default or passes
                   for f in glob.glob(os.path.join(xla, pat), recursive=True))
    modules, skipped, stems = [], [], {}
    for path, prefix, executed in files:
        rel = os.path.relpath(path, xla)
        stem = prefix + os.path.splitext(os.path.basename(path))[0]
        if stems.setdefault(stem, rel) != rel:
            sys.exit(f"{rel} and {stems[stem]} both name their modules {stem}_K")
        src = open(path, encoding="utf-8").read()
        k = 0
        for line, text in raw_strings(src):
            if "ENTRY" not in text:
                continue
            name = f"{stem}_{k}"
            k += 1
            origin = {"file": rel, "line": line}
            hole = PLACEHOLDER.search(text)
            if hole:
                skipped.append({"name": name, "origin": origin,
                                "reason": f"template placeholder {hole.group(0)!r}"})
                continue
            record = {"name": name, "origin": origin, "text": text.strip() + "\n"}
            try:
                devices = layout(record["text"], src, line, executed)
            except ValueError as e:
                skipped.append({"name": name, "origin": origin, "reason": str(e)})
                continue
            if devices:
                record["replicas"], record["partitions"] = devices
            modules.append(record)
    json.dump({"modules": modules, "skipped": skipped}, open(out, "w"), indent=1)
    print(f"{len(modules)} modules, {len(skipped)} templates skipped, from {len(files)} files")


if __name__ == "__main__":
    main()
