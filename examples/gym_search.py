"""Random search and greedy search for N pass applications on a dataset's test split, then the
leaderboard table (speed-up of each over the cpu backend's default pipeline, geometric mean).
Nothing is trained.

    AXLE_SHARED=../shared python examples/gym_search.py --steps 200 [--score runtime|cost]

It needs the `axle` package (`make python`; `target/python-venv/bin/python`) and the shared data.
The searches minimize the cheap cost-model reward; the best sequence each finds is replayed and
scored by measured run time (one thread, median of 7 runs after 2 warm-ups) unless --score says
otherwise. python -m axle.gym.leaderboard has every option (datasets, evolution, validation).
"""

import argparse
import sys

from axle.gym import leaderboard

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--steps", type=int, default=200, help="pass applications per search")
p.add_argument("--dataset", default="corpus")
p.add_argument("--score", default="runtime", choices=["runtime", "cost", "insts"])
p.add_argument("--out", default=None, help="also write the table here")
a = p.parse_args()
args = ["--dataset", a.dataset, "--split", "test", "--methods", "default,random,greedy",
        "--budget", str(a.steps), "--score", a.score, "--validate"]
if a.out:
    args += ["--out", a.out]
sys.exit(leaderboard.cli(args))
