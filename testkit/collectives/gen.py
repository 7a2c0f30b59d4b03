"""Collectives corpus: sharded JAX programs at 2, 4 and 8 CPU devices, with XLA's outputs.

  XLA_FLAGS=--xla_force_host_platform_device_count=8 JAX_PLATFORMS=cpu python gen.py

For every case NAME (listed in manifest.json with its devices, mesh and tolerances):
  NAME.hlo          what JAX hands XLA: jax.jit(f).lower(...).as_text(dialect='hlo') (for
                    shard_map: the entry wraps a `call` of the per-device body between the
                    xla.sdy.GlobalToLocalShape / LocalToGlobalShape custom calls)
  NAME.opt.hlo      XLA CPU's optimized per-device module (.compile().as_text()), num_partitions=N
                    (or replica_count=N for pmap)
  NAME.inK.npy      the global value of parameter K of NAME.hlo's entry
  NAME.outK.npy     the global K-th output leaf of NAME.hlo's entry, as XLA CPU computed it
  NAME.dD.inK.npy   device D's value of parameter K of the per-device program
  NAME.dD.outK.npy  device D's K-th output leaf as XLA CPU computed it
Device D is partition D (replica D for pmap): mesh.devices.flat[D]. bf16 arrays are uint16 bit
patterns, as in the main corpus. Inputs are seeded per case (zlib.crc32(NAME)).
"""
import json, os, zlib
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ["JAX_PLATFORMS"] = "cpu"
import numpy as np
import jax, jax.numpy as jnp
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jax import shard_map

HERE = os.path.dirname(os.path.abspath(__file__))
manifest = []


def save_leaf(path, a):
    a = np.asarray(a)
    if a.dtype == jnp.bfloat16:
        a = a.view(np.uint16)
    np.save(path, a)


def save_global(name, args, outs):
    for k, a in enumerate(args):
        save_leaf(os.path.join(HERE, f"{name}.in{k}.npy"), a)
    for k, o in enumerate(outs):
        save_leaf(os.path.join(HERE, f"{name}.out{k}.npy"), o)


def mesh_of(shape, names):
    n = int(np.prod(shape))
    return Mesh(np.array(jax.devices()[:n]).reshape(shape), names)


def case_shard_map(name, desc, f, mesh, in_specs, out_specs, args, tol):
    sf = jax.jit(shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False))
    lowered = sf.lower(*args)
    open(os.path.join(HERE, name + ".hlo"), "w").write(lowered.as_text(dialect="hlo"))
    open(os.path.join(HERE, name + ".opt.hlo"), "w").write(lowered.compile().as_text())
    devices = list(mesh.devices.flat)
    placed = [jax.device_put(a, NamedSharding(mesh, s)) for a, s in zip(args, in_specs)]
    outs = jax.tree_util.tree_leaves(sf(*placed))
    save_global(name, args, outs)
    for d, dev in enumerate(devices):
        for k, a in enumerate(placed):
            local = [s.data for s in a.addressable_shards if s.device == dev][0]
            save_leaf(os.path.join(HERE, f"{name}.d{d}.in{k}.npy"), local)
        for k, o in enumerate(outs):
            local = [s.data for s in o.addressable_shards if s.device == dev][0]
            save_leaf(os.path.join(HERE, f"{name}.d{d}.out{k}.npy"), local)
    manifest.append(dict(name=name, desc=desc, devices=len(devices), kind="shard_map",
                         mesh=dict(zip(mesh.axis_names, mesh.devices.shape)),
                         outputs=len(outs), tolerance=tol))


def case_pmap(name, desc, f, n, args, tol):
    pf = jax.pmap(f, axis_name="i", devices=jax.devices()[:n])
    lowered = pf.lower(*args)
    open(os.path.join(HERE, name + ".hlo"), "w").write(lowered.as_text(dialect="hlo"))
    open(os.path.join(HERE, name + ".opt.hlo"), "w").write(lowered.compile().as_text())
    outs = jax.tree_util.tree_leaves(pf(*args))
    save_global(name, args, outs)
    for d in range(n):
        for k, a in enumerate(args):
            save_leaf(os.path.join(HERE, f"{name}.d{d}.in{k}.npy"), np.asarray(a)[d:d + 1])
        for k, o in enumerate(outs):
            save_leaf(os.path.join(HERE, f"{name}.d{d}.out{k}.npy"), np.asarray(o)[d:d + 1])
    manifest.append(dict(name=name, desc=desc, devices=n, kind="pmap", mesh={"i": n},
                         outputs=len(outs), tolerance=tol))


def rng(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


F32 = dict(rtol=1e-5, atol=1e-6)


def dp_mlp(n):
    name = f"dp_mlp_step_{n}"
    r = rng(name)
    mesh = mesh_of((n,), ("d",))
    w1 = r.standard_normal((8, 16), dtype=np.float32) * 0.3
    b1 = r.standard_normal((16,), dtype=np.float32) * 0.1
    w2 = r.standard_normal((16, 4), dtype=np.float32) * 0.3
    x = r.standard_normal((4 * n, 8), dtype=np.float32)
    y = r.standard_normal((4 * n, 4), dtype=np.float32)

    def loss(w1, b1, w2, x, y):
        h = jax.nn.relu(x @ w1 + b1)
        return jnp.mean((h @ w2 - y) ** 2)

    def step(w1, b1, w2, x, y):
        l, g = jax.value_and_grad(loss, argnums=(0, 1, 2))(w1, b1, w2, x, y)
        g = jax.tree_util.tree_map(lambda t: lax.pmean(t, "d"), g)
        l = lax.pmean(l, "d")
        return (w1 - 0.1 * g[0], b1 - 0.1 * g[1], w2 - 0.1 * g[2], l)

    rep = P()
    case_shard_map(name, f"data-parallel MLP train step, gradients averaged with pmean over {n} devices",
                   step, mesh, (rep, rep, rep, P("d"), P("d")), (rep, rep, rep, rep),
                   (w1, b1, w2, x, y), F32)


def tp_mlp(n):
    name = f"tp_mlp_{n}"
    r = rng(name)
    mesh = mesh_of((n,), ("t",))
    x = r.standard_normal((2 * n, 8), dtype=np.float32)
    w1 = r.standard_normal((8, 4 * n), dtype=np.float32) * 0.3
    w2 = r.standard_normal((4 * n, 8), dtype=np.float32) * 0.3

    def f(x, w1, w2):
        xg = lax.all_gather(x, "t", tiled=True)          # sequence-sharded activations gathered
        h = jax.nn.relu(xg @ w1)                          # column-parallel layer
        return lax.psum_scatter(h @ w2, "t", tiled=True)  # row-parallel layer, reduce-scattered

    case_shard_map(name, f"tensor-parallel MLP: all_gather, column/row-parallel dots, psum_scatter on {n} devices",
                   f, mesh, (P("t"), P(None, "t"), P("t")), P("t"), (x, w1, w2), F32)


def ring(n):
    name = f"ppermute_ring_{n}"
    r = rng(name)
    mesh = mesh_of((n,), ("r",))
    x = r.standard_normal((n * 3, 5), dtype=np.float32)

    def f(x):
        fwd = lax.ppermute(x, "r", [(i, (i + 1) % n) for i in range(n)])
        half = lax.ppermute(x * 2, "r", [(i, i + 1) for i in range(n - 1)])  # device 0 gets zeros
        return fwd + 1, half

    case_shard_map(name, f"ring of collective-permutes and an open chain (zeros where nothing arrives) on {n} devices",
                   f, mesh, (P("r"),), (P("r"), P("r")), (x,), "exact")


def moe(n):
    name = f"moe_all_to_all_{n}"
    r = rng(name)
    mesh = mesh_of((n,), ("e",))
    tokens = r.standard_normal((n * n * 2, 6), dtype=np.float32)
    w = r.standard_normal((n, 6, 6), dtype=np.float32) * 0.4

    def f(t, w):
        # Each device sends chunk j of its tokens to expert j, applies its expert, sends back.
        d = lax.all_to_all(t, "e", 0, 0, tiled=True)
        y = jnp.tanh(d @ w[0])
        return lax.all_to_all(y, "e", 0, 0, tiled=True)

    case_shard_map(name, f"MoE dispatch and combine with two all_to_alls on {n} devices",
                   f, mesh, (P("e"), P("e")), P("e"), (tokens, w), dict(rtol=1e-5, atol=1e-6))


def while_psum(n):
    name = f"while_psum_{n}"
    r = rng(name)
    mesh = mesh_of((n,), ("w",))
    x = r.standard_normal((n * 2, 4), dtype=np.float32)

    def f(x):
        def body(i, c):
            return c * 0.5 + lax.psum(c, "w") / n + i.astype(jnp.float32)
        return lax.fori_loop(0, 3, body, x)

    case_shard_map(name, f"psum inside a while loop (fori_loop of 3) on {n} devices",
                   f, mesh, (P("w"),), P("w"), (x,), F32)


def dtypes(n):
    name = f"psum_s32_bf16_{n}"
    r = rng(name)
    mesh = mesh_of((n,), ("i",))
    a = r.integers(-1000, 1000, size=(n * 2, 8)).astype(np.int32)
    b = jnp.asarray(r.standard_normal((n * 2, 8), dtype=np.float32), dtype=jnp.bfloat16)

    def f(a, b):
        return lax.psum(a, "i"), lax.pmax(a, "i"), lax.psum(b, "i")

    case_shard_map(name, f"s32 psum and pmax, bf16 psum on {n} devices", f, mesh,
                   (P("i"), P("i")), (P(), P(), P()), (a, b),
                   ["exact", "exact", dict(rtol=2e-2, atol=2e-2)])


def mesh2d():
    name = "mesh_2x4"
    r = rng(name)
    mesh = mesh_of((2, 4), ("x", "y"))
    a = r.standard_normal((4, 32), dtype=np.float32)

    def f(a):
        sx = lax.psum(a, "x")                       # groups {0,4},{1,5},...
        gy = lax.all_gather(a, "y", tiled=True)     # groups {0,1,2,3},{4,5,6,7}
        rs = lax.psum_scatter(a, ("x", "y"), scatter_dimension=1, tiled=True)
        ix = lax.axis_index("x") * 10 + lax.axis_index("y")
        return sx, gy, rs, jnp.full((1,), ix, jnp.int32)

    case_shard_map(name, "2x4 mesh: psum over x, all_gather over y, psum_scatter over both, axis indices",
                   f, mesh, (P("x", "y"),), (P("x", "y"), P("x"), P(None, ("x", "y")), P(("x", "y"))),
                   (a,), [F32, F32, F32, "exact"])


def pmap_case(n):
    name = f"pmap_psum_{n}"
    r = rng(name)
    x = r.standard_normal((n, 3, 4), dtype=np.float32)

    def f(x):
        return lax.psum(x, "i") * lax.axis_index("i").astype(jnp.float32), lax.all_gather(x, "i")

    case_pmap(name, f"pmap: psum times axis_index, all_gather on {n} devices", f, n, (x,), F32)


for n in (2, 4, 8):
    dp_mlp(n)
tp_mlp(2); tp_mlp(4)
ring(4); ring(8)
moe(4)
while_psum(2)
dtypes(4)
mesh2d()
pmap_case(4)
json.dump(manifest, open(os.path.join(HERE, "manifest.json"), "w"), indent=1)
print(f"{len(manifest)} cases")
