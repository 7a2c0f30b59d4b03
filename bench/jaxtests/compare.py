"""Per-file comparison of JAX's tests on XLA CPU and on Axle, from the JUnit XML of run.sh.

    python bench/jaxtests/compare.py OUT_DIR [--failures]

Prints a Markdown table: per file, the tests passed on cpu, passed on axle, and the tests that
pass on cpu and not on axle ("regressions"), split into those that fail on axle and those JAX's
harness skips there (`jtu.run_on_devices("cpu")` and the like, which look at the platform's
name). With --failures, each regression follows with the first line of its failure message, so
causes can be grouped.

A file run in shards (run.sh with SHARD=K/N: FILE~K.xml) counts as one file, the sum of its
shards; a shard run on one platform only is left out of both, and so is any test that ran on
one platform only (a run interrupted with SIGINT, whose JUnit XML holds the tests it reached).

A file run whole on axle but on cpu only where axle failed (run.sh with SUBSET=1, into
OUT_DIR/cpu-subset) is marked `*`: its cpu count is the tests axle passed plus the failures cpu
passed, which leaves out tests that pass on axle and fail on cpu.
"""

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def outcomes(path):
    """{test id: (outcome, message)} with outcome one of passed, failed, skipped."""
    res = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.get("classname") is None:  # an interrupted run's entry, no test
            continue
        tid = f"{case.get('classname')}::{case.get('name')}"
        out, msg = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                out, msg = "failed", (child.get("message") or child.text or "").strip()
                break
            if child.tag == "skipped":
                out, msg = "skipped", (child.get("message") or "").strip()
        res[tid] = (out, msg)
    return res


def main():
    out = Path(sys.argv[1])
    show = "--failures" in sys.argv
    print(
        "| file | passed cpu | passed axle | not passed on axle, passed on cpu"
        " (failed / skipped) | axle/cpu |"
    )
    print("|---|---:|---:|---:|---:|")
    files = defaultdict(list)
    for axle_xml in sorted((out / "axle").glob("*.xml")):
        files[axle_xml.name[: -len(".xml")].split("~")[0]].append(axle_xml.name)
    tot_cpu = tot_ok = 0
    details = []
    for name, parts in files.items():
        axle, cpu, mark = {}, {}, ""
        for part in parts:
            a = outcomes(out / "axle" / part)
            if (out / "cpu" / part).exists():
                c = outcomes(out / "cpu" / part)
            elif (out / "cpu-subset" / part).exists():
                c = {t: ("passed", "") for t, (o, _) in a.items() if o == "passed"}
                c.update(outcomes(out / "cpu-subset" / part))
                mark = " *"
            else:
                continue
            axle.update(a)
            cpu.update(c)
        if not cpu:
            continue
        # A test that ran on one platform only (an interrupted run) is left out of both.
        common = axle.keys() & cpu.keys()
        axle = {t: v for t, v in axle.items() if t in common}
        cpu = {t: v for t, v in cpu.items() if t in common}
        passed_axle = {t for t, (o, _) in axle.items() if o == "passed"}
        passed_cpu = {t for t, (o, _) in cpu.items() if o == "passed"}
        regress = sorted(passed_cpu - passed_axle)
        skipped = sum(axle.get(t, ("missing", ""))[0] == "skipped" for t in regress)
        both = len(passed_cpu & passed_axle)
        tot_cpu += len(passed_cpu)
        tot_ok += both
        frac = both / len(passed_cpu) if passed_cpu else 1.0
        print(
            f"| {name}{mark} | {len(passed_cpu)} | {len(passed_axle)} | {len(regress)}"
            f" ({len(regress) - skipped} / {skipped}) | {frac:.2%} |"
        )
        for t in regress:
            o, msg = axle.get(t, ("missing", ""))
            details.append(f"{name} {t} [{o}] {msg.splitlines()[0][:300] if msg else ''}")
    if tot_cpu:
        print(f"| all | {tot_cpu} | | {tot_cpu - tot_ok} | {tot_ok / tot_cpu:.2%} |")
    if show:
        print()
        print("\n".join(details))


if __name__ == "__main__":
    main()
