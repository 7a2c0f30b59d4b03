"""Side by side in one process: JAX on XLA CPU and on Axle's PJRT plugin.

    JAX_PLATFORMS=axle,cpu python bench/xla/pjrt_dispatch.py [--calls N] [--rounds R]

For a small jitted function (an 8x64 @ 64x64 matrix product plus tanh, the issue's example) and a
few larger ones, it reports per backend:
- steady-state call time: the median over rounds of the mean time of N back-to-back calls on
  device-resident arguments, each call blocked on (`block_until_ready`);
- first-call time: tracing, lowering, compiling and running a fresh function (a new Python
  function object each round, so neither JAX's nor a backend's in-memory cache is hit; Axle's
  on-disk cache is off unless AXLE_CACHE_DIR is set).
Rounds alternate between the backends, so machine noise hits both alike; the ratio column is
Axle / XLA.
"""

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np


def cases():
    rng = np.random.default_rng(0)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    yield "8x64@64x64+tanh", lambda x, w: jnp.tanh(x @ w), (r(8, 64), r(64, 64))
    yield "add 1k", lambda x, y: x + y, (r(1024), r(1024))
    yield "mlp 256x512x512", (lambda x, w1, w2: jax.nn.relu(x @ w1) @ w2), (
        r(256, 512), r(512, 512), r(512, 512))


def steady(f, args, calls):
    f(*args).block_until_ready()
    t0 = time.perf_counter()
    for _ in range(calls):
        f(*args).block_until_ready()
    return (time.perf_counter() - t0) / calls


def first_call(body, args):
    fn = jax.jit(lambda *a: body(*a))
    t0 = time.perf_counter()
    fn(*args).block_until_ready()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    devs = {"xla": jax.devices("cpu")[0], "axle": jax.devices("axle")[0]}
    print(f"{'function':<18} {'what':<12} {'xla':>11} {'axle':>11} {'axle/xla':>9}")
    for name, body, host_args in cases():
        jitted = jax.jit(body)
        steady_t = {k: [] for k in devs}
        first_t = {k: [] for k in devs}
        args = {k: [jax.device_put(x, d) for x in host_args] for k, d in devs.items()}
        for _ in range(a.rounds):
            for k in devs:
                steady_t[k].append(steady(jitted, args[k], a.calls))
                first_t[k].append(first_call(body, args[k]))
        for what, t, unit, scale in (("steady", steady_t, "us", 1e6), ("first call", first_t, "ms", 1e3)):
            x, y = statistics.median(t["xla"]), statistics.median(t["axle"])
            print(f"{name:<18} {what:<12} {x * scale:>8.1f} {unit} {y * scale:>8.1f} {unit} {y / x:>9.2f}")


if __name__ == "__main__":
    main()
