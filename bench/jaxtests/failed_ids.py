"""The pytest node ids of the tests that failed in a JUnit XML of run.sh, one a line:

    python bench/jaxtests/failed_ids.py OUT_DIR/axle/FILE.xml

run.sh reruns them on `cpu` (`SUBSET=1`), for compare.py's estimate of a file not run
whole on cpu.
"""

import sys
import xml.etree.ElementTree as ET

for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    if any(c.tag in ("failure", "error") for c in case):
        mod, _, cls = case.get("classname").rpartition(".")
        print(f"{mod.replace('.', '/')}.py::{cls}::{case.get('name')}")
