"""Tests of the axle Python package: numpy round trips of every element type, axle.jit on JAX
functions against JAX's own results, and the pass-ordering Session."""

import numpy as np
import pytest

import axle

try:
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None

# Element types and a generator of values of each; the sub-byte and 8-bit types come from
# ml_dtypes when it is installed.
NUMPY_TYPES = ["pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16", "f32", "f64",
               "c64", "c128"]
ML_TYPES = ["bf16", "f8e5m2", "f8e4m3", "f8e4m3fn", "f8e4m3b11fnuz", "f8e5m2fnuz", "f8e4m3fnuz",
            "f8e3m4", "f8e8m0fnu", "f4e2m1fn", "s4", "u4", "s2", "u2"]


def available(ty):
    try:
        axle.dtype_of(ty)
        return True
    except axle.AxleError:
        return False


def values(ty, shape, seed=0):
    rng = np.random.default_rng(seed)
    dt = axle.dtype_of(ty)
    if ty == "pred":
        return rng.integers(0, 2, shape).astype(bool)
    if ty in ("c64", "c128"):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if ty in ("s2", "u2", "s4", "u4"):
        lo, hi = {"s2": (-2, 2), "u2": (0, 4), "s4": (-8, 8), "u4": (0, 16)}[ty]
        return rng.integers(lo, hi, shape).astype(dt)
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, shape, endpoint=True, dtype=dt)
    if ty == "f8e8m0fnu":
        return (2.0 ** rng.integers(-4, 5, shape)).astype(dt)
    return (rng.standard_normal(shape) * 2).astype(dt)


def identity_hlo(ty, dims):
    d = ",".join(str(x) for x in dims)
    return (f"HloModule round_trip\n\nENTRY main {{\n  p = {ty}[{d}] parameter(0)\n"
            f"  c = {ty}[{d}] copy(p)\n  ROOT t = ({ty}[{d}], {ty}[{d}]) tuple(c, p)\n}}\n")


@pytest.mark.parametrize("ty", NUMPY_TYPES + ML_TYPES)
@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_round_trip_every_element_type(ty, backend):
    if ty in ML_TYPES and ml_dtypes is None:
        pytest.skip("ml_dtypes is not installed")
    if not available(ty):
        pytest.skip(f"this ml_dtypes has no {ty}")
    x = values(ty, (3, 5), seed=len(ty))
    exe = axle.compile(identity_hlo(ty, x.shape), backend=backend)
    a, b = exe(x)
    for r in (a, b):
        assert r.dtype == x.dtype and r.shape == x.shape
        assert r.tobytes() == x.tobytes()


@pytest.mark.parametrize("ty", ["s8", "s32", "s64", "u8", "u32", "f16", "f32", "f64", "c64",
                                "c128", "bf16"])
def test_arithmetic_matches_numpy(ty):
    if not available(ty):
        pytest.skip(f"no numpy dtype for {ty}")
    x, y = values(ty, (4, 6), 1), values(ty, (4, 6), 2)
    hlo = ("HloModule add\n\nENTRY main {\n"
           f"  x = {ty}[4,6] parameter(0)\n  y = {ty}[4,6] parameter(1)\n"
           f"  ROOT z = {ty}[4,6] add(x, y)\n}}\n")
    z = axle.compile(hlo)(x, y)
    if ty == "bf16":
        want = (x.astype(np.float32) + y.astype(np.float32)).astype(x.dtype)
    else:
        with np.errstate(over="ignore"):
            want = x + y
    assert z.tobytes() == want.tobytes()


def test_arguments_are_checked():
    exe = axle.compile(identity_hlo("f32", (2, 3)))
    with pytest.raises(axle.AxleError, match="argument 0: f32\\[2,3\\] expected"):
        exe(np.zeros((2, 3), np.int32))
    with pytest.raises(axle.AxleError, match="argument 0: f32\\[2,3\\] expected, f32\\[3,2\\]"):
        exe(np.zeros((3, 2), np.float32))
    with pytest.raises(axle.AxleError, match="1 arguments expected"):
        exe()
    with pytest.raises(axle.AxleError, match="error"):
        axle.compile("HloModule m\nENTRY e {\n  ROOT x = f32[2] bogus()\n}\n")
    # Non-contiguous arguments are made contiguous first.
    x = np.arange(12, dtype=np.float32).reshape(3, 4).T[:2, :3]
    assert np.array_equal(exe(np.asarray(x, order="K"))[0], x)


def test_cache_dir(tmp_path):
    hlo = identity_hlo("f32", (4,))
    a = axle.compile(hlo, cache_dir=str(tmp_path))
    b = axle.compile(hlo, cache_dir=str(tmp_path))
    assert a.stats()["cache"].startswith("Miss")
    assert b.stats()["cache"] == "Hit"
    x = np.arange(4, dtype=np.float32)
    assert np.array_equal(b(x)[0], x)


# ---- axle.jit against JAX ----

jax = pytest.importorskip("jax")
jnp = jax.numpy

# The corpus's f32 tolerance for programs with transcendental functions.
RTOL, ATOL = 1e-4, 1e-5


def check_jit(fn, *args):
    want = jax.jit(fn)(*args)
    f = axle.jit(fn)
    got = f(*args)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=RTOL, atol=ATOL)
    assert len(f.signatures) == 1
    # The second call with the same signature reuses the compiled code.
    f(*args)
    assert len(f.signatures) == 1
    return f


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_jit_mlp():
    def mlp(params, x):
        (w1, b1), (w2, b2) = params
        h = jax.nn.relu(x @ w1 + b1)
        return jax.nn.log_softmax(h @ w2 + b2)

    params = ((rand(16, 32, seed=1), rand(32, seed=2)), (rand(32, 10, seed=3), rand(10, seed=4)))
    f = check_jit(mlp, params, rand(8, 16, seed=5))
    # Another batch size is another signature, compiled on first use.
    f(params, rand(4, 16, seed=6))
    assert len(f.signatures) == 2


def test_jit_softmax():
    check_jit(lambda x: jax.nn.softmax(x, axis=-1), rand(6, 33, seed=7))


def test_jit_layernorm():
    def layernorm(x, g, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) * jax.lax.rsqrt(v + 1e-5) * g + b

    check_jit(layernorm, rand(5, 64, seed=8), rand(64, seed=9), rand(64, seed=10))


def test_jit_scan():
    def cumulative(xs, w):
        def body(carry, x):
            carry = jnp.tanh(carry @ w + x)
            return carry, carry.sum()

        return jax.lax.scan(body, jnp.zeros(8, jnp.float32), xs)

    check_jit(cumulative, rand(12, 8, seed=11), rand(8, 8, seed=12) * 0.3)


def test_jit_conv():
    def conv(x, k):
        return jax.lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))

    check_jit(conv, rand(2, 9, 9, 3, seed=13), rand(3, 3, 3, 4, seed=14))


def test_jit_multiple_outputs_and_integers():
    def f(x, n):
        return {"sum": x.sum(0), "argmax": jnp.argmax(x, axis=1), "n": n * 2}

    check_jit(f, rand(7, 5, seed=15), np.arange(3, dtype=np.int32))


# ---- the pass-ordering Session ----

MODULE = """HloModule session

ENTRY main {
  x = f32[64,64] parameter(0)
  y = f32[64,64] parameter(1)
  a = f32[64,64] add(x, y)
  b = f32[64,64] add(x, y)
  zero = f32[] constant(0)
  z = f32[64,64] broadcast(zero), dimensions={}
  c = f32[64,64] add(a, z)
  d = f32[64,64] multiply(c, b)
  unused = f32[64,64] subtract(x, y)
  ROOT r = f32[64,64] tanh(d)
}
"""


def test_session_steps_through_a_pipeline():
    s = axle.passes.Session(MODULE)
    start = s.observe()
    assert start["instructions"] == 10
    assert "cse" in axle.passes.pass_names()
    assert dict(axle.passes.standard_pipelines())["simplify"]
    seen = [start["instructions"]]
    steps = ["dce", "cse", "fixpoint(max=4)[algsimp,dce]"]
    for name in steps:
        o = s.step(name)
        assert set(o) >= {"instructions", "flops", "bytes", "changed", "wall_seconds"}
        seen.append(o["instructions"])
    # dce drops `unused`, cse merges a and b; the rest never grows the module.
    assert seen[1] == seen[0] - 1 and seen[2] == seen[1] - 1 and seen[3] <= seen[2]
    assert s.observe()["flops"] < start["flops"]
    assert [h[0] for h in s.history()][:2] == ["dce", "cse"]
    t = s.measure(repeat=3)
    assert 0 < t < 1
    # The optimized module still computes the same thing.
    x, y = rand(64, 64, seed=16), rand(64, 64, seed=17)
    want = np.tanh((x + y) * (x + y))
    for text in (MODULE, s.hlo_text()):
        np.testing.assert_allclose(axle.compile(text)(x, y), want, rtol=RTOL, atol=ATOL)
    with pytest.raises(axle.AxleError):
        s.step("no-such-pass")
