"""Axle, an ML compiler for XLA's HLO, from Python.

- ``axle.compile(hlo_text, backend="cpu")`` compiles HLO text once and returns an
  :class:`Executable`; calling it with numpy arrays runs it. Arguments are read in place
  (contiguous arrays of the parameters' types are not copied) and results are written straight
  into the numpy arrays returned.
- ``axle.jit(fn)`` compiles a JAX function with Axle: on the first call for each input signature
  it lowers ``fn`` with JAX to HLO text and compiles that; later calls run the compiled code.
- ``axle.passes.Session`` is the pass-ordering environment (apply passes by name, observe the
  instruction count and cost estimate, measure the run time).
- ``axle.gym`` is the pass-ordering research environment (gymnasium-style ``reset``/``step``,
  observations for learning, cheap and measured rewards, datasets, baselines, a leaderboard).

Every element type numpy has maps to Axle's: bool, the signed and unsigned integers, float16,
float32, float64, complex64, complex128, and through ``ml_dtypes`` (when installed) bfloat16, the
8-bit floats, float4_e2m1fn and the 2- and 4-bit integers.
"""

import numpy as np

from . import _axle
from ._axle import AxleError

__all__ = ["AxleError", "Executable", "compile", "jit", "passes", "dtype_of", "type_name_of"]

_NUMPY_TYPES = {
    "pred": np.bool_,
    "s8": np.int8,
    "s16": np.int16,
    "s32": np.int32,
    "s64": np.int64,
    "u8": np.uint8,
    "u16": np.uint16,
    "u32": np.uint32,
    "u64": np.uint64,
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
    "c64": np.complex64,
    "c128": np.complex128,
}

# Axle's names for the ml_dtypes types, when ml_dtypes is installed.
_ML_DTYPES = {
    "bf16": "bfloat16",
    "f8e5m2": "float8_e5m2",
    "f8e4m3": "float8_e4m3",
    "f8e4m3fn": "float8_e4m3fn",
    "f8e4m3b11fnuz": "float8_e4m3b11fnuz",
    "f8e5m2fnuz": "float8_e5m2fnuz",
    "f8e4m3fnuz": "float8_e4m3fnuz",
    "f8e3m4": "float8_e3m4",
    "f8e8m0fnu": "float8_e8m0fnu",
    "f4e2m1fn": "float4_e2m1fn",
    "s4": "int4",
    "u4": "uint4",
    "s2": "int2",
    "u2": "uint2",
}

try:
    import ml_dtypes as _ml

    for _name, _attr in _ML_DTYPES.items():
        if hasattr(_ml, _attr):
            _NUMPY_TYPES[_name] = getattr(_ml, _attr)
except ImportError:  # pragma: no cover - ml_dtypes is optional
    pass

_TYPE_NAMES = {np.dtype(t): name for name, t in _NUMPY_TYPES.items()}


def dtype_of(type_name):
    """The numpy dtype of Axle's element type ``type_name`` (``"f32"``, ``"bf16"``, ...)."""
    try:
        return np.dtype(_NUMPY_TYPES[type_name])
    except KeyError:
        raise AxleError(f"element type {type_name} has no numpy dtype here "
                        "(install ml_dtypes for bf16, f8 and the sub-byte types)") from None


def type_name_of(dtype):
    """Axle's element type name of a numpy dtype."""
    try:
        return _TYPE_NAMES[np.dtype(dtype)]
    except KeyError:
        raise AxleError(f"numpy dtype {np.dtype(dtype)} has no Axle element type") from None


def _describe(ty, dims):
    """``f32[2,3]``, as Axle's messages write shapes."""
    return f"{ty}[{','.join(str(d) for d in dims)}]"


def _byte_view(a):
    """A C-contiguous array's bytes as a flat uint8 array sharing its memory."""
    return a.reshape(-1).view(np.uint8)


class Executable:
    """A module compiled by :func:`compile`. Call it with one numpy array (or anything
    ``numpy.asarray`` takes) per array leaf of the entry parameters; it returns the root's array
    leaves, one array or a tuple."""

    def __init__(self, native):
        self._native = native
        self.param_specs = native.param_specs()
        self.output_specs = native.output_specs()
        self._tuple = native.output_is_tuple() or len(self.output_specs) != 1
        self._out_dtypes = [(dtype_of(t), tuple(d)) for t, d in self.output_specs]

    @property
    def backend(self):
        """The backend's name."""
        return self._native.backend()

    def stats(self):
        """Compile time (seconds), instructions, temporary bytes and the cache outcome."""
        return self._native.stats()

    def __call__(self, *arrays):
        if len(arrays) != len(self.param_specs):
            raise AxleError(f"{len(self.param_specs)} arguments expected, {len(arrays)} given")
        args = []
        for k, (a, (ty, dims)) in enumerate(zip(arrays, self.param_specs)):
            a = np.asarray(a)
            if a.dtype != dtype_of(ty):
                got = _TYPE_NAMES.get(a.dtype, str(a.dtype))
                raise AxleError(f"argument {k}: {_describe(ty, dims)} expected, "
                                f"{_describe(got, a.shape)} given")
            a = np.ascontiguousarray(a)
            args.append((ty, list(a.shape), _byte_view(a)))
        outs = [np.empty(dims, dtype) for dtype, dims in self._out_dtypes]
        self._native.run(args, [_byte_view(o) for o in outs])
        return tuple(outs) if self._tuple else outs[0]


def compile(hlo_text, backend="cpu", threads=None, cache_dir=None, pipeline=None):
    """Compiles HLO text (as ``jax.jit(f).lower(...).as_text(dialect="hlo")`` gives) on
    ``backend`` (``"cpu"`` or ``"interpreter"``). ``threads`` per run (default: the backend's),
    ``cache_dir`` for the compilation cache (default: none), ``pipeline`` a pass pipeline to run
    first (a standard pipeline's name or pipeline text; default: the backend's own, ``"none"``
    for none)."""
    return Executable(_axle.compile(hlo_text, backend, threads, cache_dir, pipeline))


def jit(fn=None, *, backend="cpu", threads=None, cache_dir=None):
    """Compiles a JAX function with Axle. On each call, the arguments (a pytree of arrays) are
    flattened; the first call for a signature (shapes and dtypes) lowers ``fn`` with
    ``jax.jit(fn, keep_unused=True).lower(*args).as_text(dialect="hlo")`` and compiles that with
    Axle; every call runs the compiled code and returns the result in ``fn``'s output structure.
    Usable as ``@axle.jit`` or ``@axle.jit(backend="interpreter")``."""
    if fn is None:
        return lambda f: jit(f, backend=backend, threads=threads, cache_dir=cache_dir)
    import functools

    import jax

    compiled = {}

    @functools.wraps(fn)
    def wrapped(*args):
        leaves, in_tree = jax.tree_util.tree_flatten(args)
        leaves = [np.asarray(x) for x in leaves]
        key = (in_tree, tuple((x.shape, x.dtype) for x in leaves))
        entry = compiled.get(key)
        if entry is None:
            lowered = jax.jit(fn, keep_unused=True).lower(*args)
            exe = compile(lowered.as_text(dialect="hlo"), backend=backend, threads=threads,
                          cache_dir=cache_dir)
            entry = (exe, lowered.out_tree)
            compiled[key] = entry
        exe, out_tree = entry
        outs = exe(*leaves)
        if not isinstance(outs, tuple):
            outs = (outs,)
        return jax.tree_util.tree_unflatten(out_tree, list(outs))

    wrapped.signatures = compiled
    return wrapped


from . import passes  # noqa: E402  (the submodule needs the names above)
