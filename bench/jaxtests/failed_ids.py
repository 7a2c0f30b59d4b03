"""The pytest node ids of the tests that failed in a JUnit XML of run.sh, one a line:

    python bench/jaxtests/failed_ids.py OUT_DIR/axle/FILE.xml [--skipped | --all]

With --skipped, also the tests it skipped; with --all, every test in it (for run.sh's IDS).

run.sh reruns those failed or skipped on axle on `cpu` (`SUBSET=1`), for compare.py's estimate
of a file not run whole on cpu (JAX's harness skips some tests on any platform not named cpu).
"""

import sys
import xml.etree.ElementTree as ET

every = "--all" in sys.argv
outcomes = ("failure", "error", "skipped") if "--skipped" in sys.argv else ("failure", "error")
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    if case.get("classname") is None:  # an interrupted run's or a collection error's entry
        continue
    if every or any(c.tag in outcomes for c in case):
        mod, _, cls = case.get("classname").rpartition(".")
        print(f"{mod.replace('.', '/')}.py::{cls}::{case.get('name')}")
