"""Sharded JAX programs on 4 devices, run by whichever platform the environment selects.

    JAX_PLATFORMS=axle AXLE_DEVICES=4 python devices_cases.py OUT.npz
    JAX_PLATFORMS=cpu XLA_FLAGS=--xla_force_host_platform_device_count=4 python devices_cases.py OUT.npz

Writes every case's outputs (global arrays; bf16 as uint16 bit patterns) to OUT.npz, with the
same inputs on every platform (a fixed seed), so that ``test_jax_devices.py`` can compare Axle's
outputs with XLA CPU's. On ``axle`` it also records what JAX sees of the devices and the errors
of programs Axle refuses (``refused.*`` entries).
"""

import sys

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

N = 4
RNG = np.random.default_rng(32)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def smap(f, mesh, in_specs, out_specs):
    return jax.jit(
        jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    )


def cases(mesh, mesh2):
    """(name, function, arguments) for each case."""
    x = rand(8, 3)
    ring = [(i, (i + 1) % N) for i in range(N)]

    def mlp_step(params, xb, yb):
        def loss(p):
            h = jnp.tanh(xb @ p["w1"] + p["b1"])
            return jnp.mean((h @ p["w2"] - yb) ** 2)

        g = jax.grad(loss)(params)
        g = lax.pmean(g, "x")
        return jax.tree_util.tree_map(lambda p, d: p - 0.1 * d, params, g), lax.pmean(
            loss(params), "x"
        )

    params = {"w1": rand(6, 16), "b1": rand(16), "w2": rand(16, 2)}
    ints = RNG.integers(-1000, 1000, size=(8, 5)).astype(np.int32)
    halves = rand(8, 16).astype(jnp.bfloat16)
    return [
        ("psum", smap(lambda a: lax.psum(a, "x"), mesh, P("x"), P()), (x,)),
        (
            "all_gather",
            smap(lambda a: lax.all_gather(a, "x", tiled=True) * 2, mesh, P("x"), P()),
            (x,),
        ),
        (
            "psum_scatter",
            smap(
                lambda a: lax.psum_scatter(a, "x", scatter_dimension=0, tiled=True),
                mesh,
                P(),
                P("x"),
            ),
            (x,),
        ),
        ("ppermute", smap(lambda a: lax.ppermute(a, "x", ring), mesh, P("x"), P("x")), (x,)),
        (
            "all_to_all",
            smap(
                lambda a: lax.all_to_all(a, "x", split_axis=1, concat_axis=0, tiled=True),
                mesh,
                P("x"),
                P("x"),
            ),
            (rand(8, 8),),
        ),
        (
            "axis_index",
            smap(lambda a: a * lax.axis_index("x").astype(a.dtype), mesh, P("x"), P("x")),
            (x,),
        ),
        (
            "pmap_psum",
            jax.pmap(lambda a: (lax.psum(a, "i"), a * lax.axis_index("i")), axis_name="i"),
            (rand(N, 3, 2),),
        ),
        (
            "dp_mlp_step",
            smap(mlp_step, mesh, (P(), P("x"), P("x")), (P(), P())),
            (params, rand(16, 6), rand(16, 2)),
        ),
        (
            "int32",
            smap(
                lambda a: (lax.psum(a, "x"), lax.pmax(a, "x"), lax.pmin(a, "x")),
                mesh,
                P("x"),
                (P(), P(), P()),
            ),
            (ints,),
        ),
        ("bf16", smap(lambda a: lax.psum(a, "x"), mesh, P("x"), P()), (halves,)),
        (
            "mesh_2x2",
            smap(
                lambda a: lax.all_gather(lax.psum(a, "a"), "b", tiled=True),
                mesh2,
                P("a", "b"),
                P(None, None),
            ),
            (rand(4, 6),),
        ),
    ]


def leaves(tree):
    out = []
    for a in jax.tree_util.tree_leaves(tree):
        a = np.asarray(a)
        out.append(a.view(np.uint16) if a.dtype == jnp.bfloat16 else a)
    return out


def main(path):
    devices = jax.devices()
    platform = devices[0].platform
    assert len(devices) == N, devices
    mesh = Mesh(np.array(devices), ("x",))
    mesh2 = Mesh(np.array(devices).reshape(2, 2), ("a", "b"))
    out = {}
    for name, f, args in cases(mesh, mesh2):
        try:
            for k, a in enumerate(leaves(f(*args))):
                out[f"{name}.{k}"] = a
        except Exception as e:  # noqa: BLE001 - recorded, the test reports it
            out[f"error.{name}"] = np.array(f"{type(e).__name__}: {e}")
    if platform == "axle":
        out["devices"] = np.array([(d.id, d.process_index) for d in devices])
        out["kinds"] = np.array([d.device_kind for d in devices])
        # Placement: a committed array on device 2 runs there, and copies to device 3.
        y = jax.device_put(np.arange(6, dtype=np.float32), devices[2])
        z = jax.jit(lambda v: v * 2)(y)
        w = jax.device_put(z, devices[3])
        out["placed"] = np.array(
            [d.id for a in (y, z, w) for d in a.devices()] + list(np.asarray(w).astype(int))
        )
    sharded = jax.device_put(rand(8, 4), NamedSharding(mesh, P("x")))
    if platform == "axle":
        # Refused: a jit over a sharded array without shard_map needs automatic partitioning.
        try:
            jax.jit(lambda v: jnp.sin(v).sum(axis=1))(sharded)
            out["refused.auto"] = np.array("no error")
        except Exception as e:  # noqa: BLE001 - the message is what is checked
            out["refused.auto"] = np.array(str(e))
    # The process goes on: the same data through shard_map runs.
    out["after_refusal.0"] = np.asarray(
        smap(lambda v: jnp.sin(v).sum(axis=1), mesh, P("x"), P("x"))(sharded)
    )
    np.savez(path, **out)


if __name__ == "__main__":
    main(sys.argv[1])
