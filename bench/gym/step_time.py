"""Wall time of axle.gym steps with cheap rewards on large modules: reset, then every pass of
the action space on a fork of the start state ("from start"), then every pass once in action
order on one module ("in sequence"), then the default pipeline, timing each env.step (pass,
verification, compaction, observation, reward) and the observation alone.

    AXLE_SHARED=../shared python bench/gym/step_time.py [large/large_wide_10k ...]
"""

import statistics
import sys
import time

import axle.gym as gym

uris = sys.argv[1:] or ["large/large_wide_10k", "large/large_layer_stack_10k",
                        "large/large_deep_dag_10k"]
for uri in uris:
    for obs in ["features", "graph"]:
        env = gym.AxleEnv(uri, observation_space=obs, reward_space="cost")
        t = time.perf_counter()
        _, info = env.reset(seed=0)
        reset_s = time.perf_counter() - t
        insts = int(env.observation["features"][0])
        fresh = []
        for a in env.action_space.names[1:]:
            f = env.fork()
            t = time.perf_counter()
            f.step(a)
            fresh.append((time.perf_counter() - t, a))
        times = []
        for a in env.action_space.names[1:] + [env.baseline_pipeline]:
            t = time.perf_counter()
            env.step(a)
            times.append((time.perf_counter() - t, a))
        t = time.perf_counter()
        for _ in range(10):
            env.observation[obs]
        obs_s = (time.perf_counter() - t) / 10
        passes = [s for s, a in times[:-1]]
        slow = max(times[:-1])
        fslow = max(fresh)
        fmed = statistics.median(s for s, _ in fresh)
        print(f"{uri} ({insts} instructions), observation {obs}: reset {reset_s * 1e3:.0f} ms; "
              f"{len(fresh)} passes from start: median {fmed * 1e3:.1f} ms, max "
              f"{fslow[0] * 1e3:.1f} ms ({fslow[1]}); in sequence: median "
              f"{statistics.median(passes) * 1e3:.1f} ms, "
              f"max {slow[0] * 1e3:.1f} ms ({slow[1]}); default pipeline step "
              f"{times[-1][0] * 1e3:.0f} ms; observation alone {obs_s * 1e3:.2f} ms")
