"""Per-file comparison of JAX's tests on XLA CPU and on Axle, from the JUnit XML of run.sh.

    python bench/jaxtests/compare.py OUT_DIR [--failures]

Prints a Markdown table: per file, the tests passed on cpu, passed on axle, and the tests that
pass on cpu and fail on axle ("regressions"). With --failures, each regression follows with the
first line of its failure message, so causes can be grouped.

A file run whole on axle but on cpu only where axle failed (run.sh with SUBSET=1, into
OUT_DIR/cpu-subset) is marked `*`: its cpu count is the tests axle passed plus the failures cpu
passed, which leaves out tests that pass on axle and fail on cpu.
"""

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def outcomes(path):
    """{test id: (outcome, message)} with outcome one of passed, failed, skipped."""
    res = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        tid = f"{case.get('classname')}::{case.get('name')}"
        out, msg = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                out, msg = "failed", (child.get("message") or child.text or "").strip()
                break
            if child.tag == "skipped":
                out = "skipped"
        res[tid] = (out, msg)
    return res


def main():
    out = Path(sys.argv[1])
    show = "--failures" in sys.argv
    print("| file | passed cpu | passed axle | fail on axle, pass on cpu | axle/cpu |")
    print("|---|---:|---:|---:|---:|")
    tot_cpu = tot_ok = 0
    details = []
    for axle_xml in sorted((out / "axle").glob("*.xml")):
        axle = outcomes(axle_xml)
        passed_axle = {t for t, (o, _) in axle.items() if o == "passed"}
        mark = ""
        if (out / "cpu" / axle_xml.name).exists():
            cpu = outcomes(out / "cpu" / axle_xml.name)
        elif (out / "cpu-subset" / axle_xml.name).exists():
            cpu = {t: ("passed", "") for t in passed_axle}
            cpu.update(outcomes(out / "cpu-subset" / axle_xml.name))
            mark = " *"
        else:
            continue
        passed_cpu = {t for t, (o, _) in cpu.items() if o == "passed"}
        regress = sorted(passed_cpu - passed_axle)
        both = len(passed_cpu & passed_axle)
        tot_cpu += len(passed_cpu)
        tot_ok += both
        name = axle_xml.name[: -len(".xml")] + mark
        frac = both / len(passed_cpu) if passed_cpu else 1.0
        print(f"| {name} | {len(passed_cpu)} | {len(passed_axle)} | {len(regress)} | {frac:.2%} |")
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
