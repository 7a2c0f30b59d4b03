"""The spaces of :mod:`axle.gym`: gymnasium's where gymnasium is installed (``pip install
axle[gym]``), else small stand-ins with the same attributes (``n``, ``shape``, ``dtype``,
``sample()``, ``contains()``), so the environment works without it.

Beyond gymnasium's own spaces: :class:`ActionSpace`, a ``Discrete`` whose actions have names;
:class:`HloTextSpace` for the module as text; :class:`CsrGraphSpace` for the graph as CSR arrays;
:class:`RewardSpace`, which gymnasium has no notion of (CompilerGym's), naming a reward and the
baseline it is normalised to.
"""

import numpy as np

try:  # gymnasium is optional.
    import gymnasium as _gym
    from gymnasium import spaces as _spaces
except ImportError:  # pragma: no cover - exercised by the fallback test
    _gym = None
    _spaces = None

__all__ = ["ActionSpace", "Box", "CsrGraphSpace", "Dict", "HloTextSpace", "RewardSpace",
           "Space", "have_gymnasium"]


def have_gymnasium():
    """Whether the spaces are gymnasium's."""
    return _gym is not None


if _spaces is not None:
    Space = _spaces.Space
    Box = _spaces.Box
    Dict = _spaces.Dict
    _Discrete = _spaces.Discrete
else:
    class Space:
        """A set of values with ``sample()`` and ``contains()`` (gymnasium's interface)."""

        def __init__(self, shape=None, dtype=None, seed=None):
            self.shape = shape
            self.dtype = None if dtype is None else np.dtype(dtype)
            self.np_random = np.random.default_rng(seed)

        def seed(self, seed=None):
            """Reseeds :meth:`sample`."""
            self.np_random = np.random.default_rng(seed)
            return [seed]

        def __contains__(self, x):
            return self.contains(x)

    class _Discrete(Space):
        """The integers ``0..n``."""

        def __init__(self, n, seed=None):
            super().__init__((), np.int64, seed)
            self.n = int(n)
            self.start = 0

        def sample(self):
            return int(self.np_random.integers(self.n))

        def contains(self, x):
            return isinstance(x, (int, np.integer)) and 0 <= int(x) < self.n

    class Box(Space):
        """Arrays of ``shape`` and ``dtype`` with elements in ``[low, high]``."""

        def __init__(self, low, high, shape, dtype=np.float64, seed=None):
            super().__init__(tuple(shape), dtype, seed)
            self.low = np.full(shape, low, dtype=self.dtype)
            self.high = np.full(shape, high, dtype=self.dtype)

        def sample(self):
            lo = np.where(np.isfinite(self.low), self.low, 0)
            hi = np.where(np.isfinite(self.high), self.high, lo + 1)
            return self.np_random.uniform(lo, hi).astype(self.dtype)

        def contains(self, x):
            x = np.asarray(x)
            return (x.shape == self.shape and np.can_cast(x.dtype, self.dtype)
                    and bool(np.all(x >= self.low)) and bool(np.all(x <= self.high)))

    class Dict(Space):
        """A dict of named spaces."""

        def __init__(self, spaces, seed=None):
            super().__init__(None, None, seed)
            self.spaces = dict(spaces)

        def __getitem__(self, k):
            return self.spaces[k]

        def sample(self):
            return {k: s.sample() for k, s in self.spaces.items()}

        def contains(self, x):
            return (isinstance(x, dict) and x.keys() == self.spaces.keys()
                    and all(s.contains(x[k]) for k, s in self.spaces.items()))


class ActionSpace(_Discrete):
    """A discrete space whose action ``k`` is named ``names[k]``: a pass with its options in
    pipeline syntax (``constant-folding{max_elements=4096}``), or ``stop``."""

    def __init__(self, names, seed=None):
        super().__init__(len(names), seed=seed)
        self.names = list(names)
        self._index = {n: k for k, n in enumerate(self.names)}

    def index(self, name):
        """The index of the action named ``name``."""
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"no action named {name!r}") from None

    def __getitem__(self, k):
        return self.names[k]

    def __repr__(self):
        return f"ActionSpace({self.n} actions)"


class HloTextSpace(Space):
    """HLO text of a module (any string that starts a module)."""

    def __init__(self, seed=None):
        super().__init__(None, None, seed)

    def sample(self):
        raise NotImplementedError("HLO text cannot be sampled; observe a module instead")

    def contains(self, x):
        return isinstance(x, str) and "ENTRY" in x

    def __repr__(self):
        return "HloTextSpace()"


# The graph's arrays and their dtypes (see GymModule.graph).
GRAPH_ARRAYS = {
    "opcode": np.int32, "element_type": np.int32, "rank": np.int32, "elements": np.int64,
    "dims": np.int64,
    "result_bytes": np.float64, "flops": np.float64, "transcendentals": np.float64,
    "bytes": np.float64, "computation": np.int32, "indptr": np.int64, "indices": np.int32,
    "edge_type": np.int8,
}


class CsrGraphSpace(Space):
    """The module as a graph in CSR form: a dict of 1-D arrays, per node (``opcode``,
    ``element_type``, ``rank``, ``elements``, ``result_bytes``, ``flops``, ``transcendentals``,
    ``bytes``, ``computation``) and per edge (``indices``, ``edge_type``), with ``indptr`` of
    length nodes + 1 (edges of node ``k`` are ``indptr[k]:indptr[k+1]``), and ``dims``, every
    node's dimensions one after another (``rank[k]`` of them for node ``k``)."""

    def __init__(self, seed=None):
        super().__init__(None, None, seed)

    def sample(self):
        raise NotImplementedError("graphs cannot be sampled; observe a module instead")

    def contains(self, x):
        if not isinstance(x, dict) or set(x) != set(GRAPH_ARRAYS):
            return False
        n = len(x["opcode"])
        e = len(x["indices"])
        return (all(np.asarray(x[k]).dtype == t for k, t in GRAPH_ARRAYS.items())
                and len(x["indptr"]) == n + 1 and int(x["indptr"][-1]) == e
                and len(x["edge_type"]) == e
                and len(x["dims"]) == int(np.sum(x["rank"]))
                and all(len(x[k]) == n for k in GRAPH_ARRAYS
                        if k not in ("indptr", "indices", "edge_type", "dims")))

    def __repr__(self):
        return "CsrGraphSpace()"


class RewardSpace:
    """A reward: ``name`` (``insts``, ``cost`` or ``runtime``), what it measures, and the
    ``baseline`` it is normalised by (the metric of the benchmark after the backend's default
    pipeline, set at ``reset``). The reward of a step is ``(before - after) / baseline``, so an
    episode's rewards add up to ``(initial - final) / baseline`` and higher is better."""

    def __init__(self, name, description):
        self.name = name
        self.description = description
        self.baseline = None
        self.range = (-np.inf, np.inf)

    def __repr__(self):
        return f"RewardSpace({self.name!r}, baseline={self.baseline})"
