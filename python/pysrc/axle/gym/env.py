"""The pass-ordering environment, :class:`AxleEnv` (see the package docs of :mod:`axle.gym`)."""

import dataclasses
import json
import math
import typing

import numpy as np

from .. import AxleError
from .. import _axle
from . import datasets as _datasets
from . import spaces as _spaces

__all__ = ["AxleEnv", "EnvState", "Measurement", "RuntimeConfig", "ValidationResult",
           "action_names", "OBSERVATIONS", "REWARDS"]

try:
    import gymnasium as _gym

    _Base = _gym.Env
except ImportError:  # pragma: no cover - exercised by the fallback test
    _Base = object

OPCODES = tuple(_axle.opcode_names())
ELEMENT_TYPES = tuple(_axle.element_type_names())
COST_FEATURES = tuple(_axle.cost_feature_names())

#: Observation space names.
OBSERVATIONS = ("opcode_counts", "features", "hlo", "graph")
#: Reward space names.
REWARDS = ("insts", "cost", "runtime")

_REWARD_DOCS = {
    "insts": "live instructions (all computations)",
    "cost": "the cost model's estimate: flops + 11 transcendentals + 6 bytes",
    "runtime": "measured run time on the backend (median of the repeats)",
}


def _int_values(default, lo, hi):
    d = int(default)
    vals = [d, d // 4, d * 4] if d > 0 else [d, 1, 16]
    out = []
    for v in vals:
        v = min(max(v, lo), hi)
        if v not in out:
            out.append(v)
    return out


def action_names():
    """The names of the discrete actions: ``stop`` first, then every registered pass with its
    default options, then each pass once per other value of one option (each other choice, the
    other boolean, and a quarter and four times an integer's default, within its range), in
    pipeline syntax (``fusion{target=gpu}``)."""
    names = ["stop"]
    for name, _doc, opts in _axle.pass_specs():
        names.append(name)
        for opt, kind, default, choices, lo, hi in opts:
            if kind == "choice":
                others = [c for c in choices if c != default]
            elif kind == "bool":
                others = ["false" if default == "true" else "true"]
            elif kind == "int":
                others = [str(v) for v in _int_values(default, lo, hi)[1:]]
            else:
                others = []
            names.extend(f"{name}{{{opt}={v}}}" for v in others)
    return names


@dataclasses.dataclass(frozen=True)
class EnvState:
    """What replays an episode exactly: the benchmark, the seed given to ``reset`` and the
    actions taken (names, or pipeline text for actions given as text)."""

    benchmark: str
    seed: int
    actions: tuple = ()

    def to_json(self):
        """The state as a JSON string."""
        return json.dumps({"benchmark": self.benchmark, "seed": self.seed,
                           "actions": list(self.actions)})

    @staticmethod
    def from_json(text):
        """The state :meth:`to_json` wrote."""
        d = json.loads(text)
        return EnvState(d["benchmark"], int(d["seed"]), tuple(d["actions"]))


@dataclasses.dataclass(frozen=True)
class RuntimeConfig:
    """How run time is measured: the module is compiled as it stands (no further passes) on
    ``backend`` with ``threads`` threads per run, run ``warmup`` times, then ``repeat`` times
    timed; the value is the median. ``cache_dir``: a compilation cache directory, so that
    states sharing kernels with one measured before (in this process or another) load those
    kernels' code instead of compiling them again (the measured times do not change)."""

    backend: str = "cpu"
    threads: int = 1
    warmup: int = 2
    repeat: int = 7
    cache_dir: typing.Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Measurement:
    """A run-time measurement: ``median`` seconds, every timed run's ``times``, ``noise`` (the
    semi-interquartile range over the median: half the spread of the middle half of the runs,
    relative) and ``compile_seconds``."""

    median: float
    times: tuple
    noise: float
    compile_seconds: float


@dataclasses.dataclass(frozen=True)
class ValidationResult:
    """The outcome of :meth:`AxleEnv.validate`: ``ok``, and what differs when not."""

    ok: bool
    message: str = ""

    def __bool__(self):
        return self.ok


# Run times by (module hash, RuntimeConfig, input seed), for every environment of the process.
_RUNTIME_CACHE = {}
# Baseline metrics by (module hash, pipeline, metric, RuntimeConfig, seed).
_BASELINE_CACHE = {}


def measure(module, config, seed=0):
    """The run time of a ``GymModule`` as ``config`` says, from the process's cache when the
    same module (by hash) was measured the same way before."""
    key = (module.hash(), config, seed)
    m = _RUNTIME_CACHE.get(key)
    if m is None:
        compile_s, times = module.measure(config.backend, config.threads, config.warmup,
                                          config.repeat, seed, config.cache_dir)
        q1, med, q3 = np.percentile(times, [25, 50, 75])
        m = Measurement(float(med), tuple(times), float((q3 - q1) / 2 / med) if med > 0 else 0.0,
                        compile_s)
        _RUNTIME_CACHE[key] = m
    return m


class _Observations:
    """``env.observation[name]``: any observation of the current state, computed on demand."""

    def __init__(self, env):
        self._env = env

    def __getitem__(self, name):
        return self._env._observe_one(name)

    def __iter__(self):
        return iter(OBSERVATIONS)


class AxleEnv(_Base):
    """A pass-ordering environment: one HLO module, optimized one pass at a time.

    ``benchmark``: a URI (``corpus/softmax_f32``, ``generated/7``, ``dump:/path/m.txt``, see
    :mod:`axle.gym.datasets`) or a :class:`~axle.gym.datasets.Benchmark`; ``reset`` may name
    another. Without one, ``reset`` draws a benchmark from ``dataset``'s train split.
    ``observation_space``: one name of :data:`OBSERVATIONS` or a list of them (the observation
    is then a dict). ``reward_space``: one of :data:`REWARDS`. ``backend``: whose default
    pipeline is the baseline (``baseline_pipeline`` overrides it). ``threads``: the thread pool
    passes run in (None: every core; results do not depend on it). ``max_steps``: steps before
    ``truncated``. ``runtime``: how the ``runtime`` reward measures (:class:`RuntimeConfig`).
    ``cost_weights``: (per flop, transcendental, byte, kernel) weights for the ``cost`` metric,
    such as :func:`axle.gym.calibrate.load` returns (default: the cpu fusion target's constants,
    ``flops + 11 transcendentals + 6 bytes``).
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, benchmark=None, *, observation_space="features", reward_space="cost",
                 dataset="corpus", backend="cpu", baseline_pipeline=None, threads=None,
                 max_steps=100, runtime=None, cost_weights=None):
        names = [observation_space] if isinstance(observation_space, str) else list(
            observation_space)
        for n in names:
            if n not in OBSERVATIONS:
                raise AxleError(f"unknown observation space {n!r}: one of "
                                f"{', '.join(OBSERVATIONS)}")
        if reward_space not in REWARDS:
            raise AxleError(f"unknown reward space {reward_space!r}: one of {', '.join(REWARDS)}")
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise AxleError(f"threads must be a positive integer or None, not {threads!r}")
        if not isinstance(max_steps, int) or max_steps < 1:
            raise AxleError(f"max_steps must be a positive integer, not {max_steps!r}")
        if cost_weights is not None:
            try:
                cost_weights = tuple(float(w) for w in cost_weights)
            except (TypeError, ValueError):
                cost_weights = ()
            if len(cost_weights) != 4 or not all(w >= 0 for w in cost_weights):
                raise AxleError("cost_weights must be four non-negative numbers (per flop, "
                                "transcendental, byte, kernel)")
        self.cost_weights = cost_weights
        pipelines = dict(_axle.standard_pipelines())
        if baseline_pipeline is None:
            baseline_pipeline = "cpu" if backend == "cpu" else {"nvptx": "gpu",
                                                                "nvptx-sim": "gpu"}.get(backend)
            if baseline_pipeline is None:
                raise AxleError(f"backend {backend!r} has no standard pipeline; "
                                "give baseline_pipeline")
        self.baseline_pipeline = pipelines.get(baseline_pipeline, baseline_pipeline)
        self.backend = backend
        self.threads = threads
        self.max_steps = max_steps
        self.runtime_config = runtime or RuntimeConfig(backend=backend)
        self._obs_names = names
        self._obs_single = isinstance(observation_space, str)
        self.action_space = _spaces.ActionSpace(action_names())
        self.observation_space = self._make_observation_space()
        self.reward_space = _spaces.RewardSpace(reward_space, _REWARD_DOCS[reward_space])
        self.reward_range = (-math.inf, math.inf)
        self.observation = _Observations(self)
        self._dataset = dataset
        self._benchmark = None if benchmark is None else _datasets.benchmark(benchmark)
        self._original = None
        self._original_uri = None
        self._module = None
        self._seed = 0
        self._actions = []
        self._prev = None
        self._reference = None
        self.np_random = np.random.default_rng()

    # ---- spaces ----------------------------------------------------------------------------

    def _make_observation_space(self):
        def one(n):
            if n == "opcode_counts":
                return _spaces.Box(0, np.iinfo(np.int64).max, (len(OPCODES),), np.int64)
            if n == "features":
                return _spaces.Box(0.0, np.inf, (len(COST_FEATURES),), np.float64)
            if n == "hlo":
                return _spaces.HloTextSpace()
            return _spaces.CsrGraphSpace()

        if self._obs_single:
            return one(self._obs_names[0])
        return _spaces.Dict({n: one(n) for n in self._obs_names})

    # ---- observations ----------------------------------------------------------------------

    def _observe_one(self, name):
        m = self._require_module()
        if name == "opcode_counts":
            return np.frombuffer(m.opcode_counts(), dtype=np.int64)
        if name == "features":
            return np.frombuffer(m.cost_features(), dtype=np.float64)
        if name == "hlo":
            return m.hlo_text()
        if name == "graph":
            return {k: np.frombuffer(b, dtype=np.dtype(t)) for k, (t, b) in m.graph().items()}
        raise KeyError(f"unknown observation {name!r}: one of {', '.join(OBSERVATIONS)}")

    def _observe(self):
        if self._obs_single:
            return self._observe_one(self._obs_names[0])
        return {n: self._observe_one(n) for n in self._obs_names}

    def _require_module(self):
        if self._module is None:
            raise AxleError("the environment has no module yet: call reset() first")
        return self._module

    # ---- metrics ---------------------------------------------------------------------------

    def _metric(self, module, name=None):
        name = name or self.reward_space.name
        if name == "insts":
            return float(module.instructions())
        if name == "cost":
            return float(module.cost(self.cost_weights))
        return measure(module, self.runtime_config, self._seed).median

    def _baseline(self, name=None):
        name = name or self.reward_space.name
        key = (self._original.hash(), self.baseline_pipeline, name, self.runtime_config,
               self._seed if name == "runtime" else 0,
               self.cost_weights if name == "cost" else None)
        v = _BASELINE_CACHE.get(key)
        if v is None:
            m = self._original.copy()
            m.apply(self.baseline_pipeline)
            v = self._metric(m, name)
            _BASELINE_CACHE[key] = v
        return v

    # ---- the gym interface -----------------------------------------------------------------

    def reset(self, *, seed=None, options=None, benchmark=None):
        """Starts an episode on ``benchmark`` (or ``options["benchmark"]``, or the previous
        one, or one drawn from the dataset's train split). ``seed`` (default 0) fixes the inputs
        of :meth:`validate` and of run-time measurements, and the draw of a benchmark. Returns
        (observation, info)."""
        if seed is not None and (not isinstance(seed, (int, np.integer)) or seed < 0):
            raise AxleError(f"seed must be a non-negative integer, not {seed!r}")
        if _Base is not object:
            super().reset(seed=None if seed is None else int(seed))
        elif seed is not None:
            self.np_random = np.random.default_rng(int(seed))
        if benchmark is None and options:
            benchmark = options.get("benchmark")
        if benchmark is not None:
            bench = _datasets.benchmark(benchmark)
        elif self._benchmark is not None:
            bench = self._benchmark
        else:
            uris = _datasets.dataset(self._dataset).uris("train")
            if not uris:
                raise AxleError(f"dataset {self._dataset} has no train benchmarks")
            bench = _datasets.benchmark(uris[int(self.np_random.integers(len(uris)))])
        seed = 0 if seed is None else int(seed)
        # Nothing changes until the benchmark has loaded: a benchmark that does not parse
        # leaves the environment as it was.
        if self._original is None or self._original_uri != bench.uri:
            original = _axle.GymModule(bench.hlo_text(), self.threads)
            self._original, self._original_uri, self._reference = original, bench.uri, None
        elif self._reference is not None and self._reference.seed != seed:
            self._reference = None
        self._benchmark = bench
        self._seed = seed
        self._module = self._original.copy()
        self._actions = []
        self.reward_space.baseline = self._baseline()
        self._prev = self._metric(self._module)
        info = {"benchmark": self._benchmark.uri, "baseline": self.reward_space.baseline,
                self.reward_space.name: self._prev}
        return self._observe(), info

    def _action_name(self, action):
        if isinstance(action, (int, np.integer)) and not isinstance(action, bool):
            if not 0 <= int(action) < self.action_space.n:
                raise AxleError(f"action {action} is outside 0..{self.action_space.n - 1}")
            return self.action_space.names[int(action)]
        if isinstance(action, str):
            return action
        raise AxleError(f"an action is an index or a pass name, not {type(action).__name__}")

    def step(self, action):
        """Applies ``action`` (an index into ``action_space``, an action's name, or any
        pipeline text) and returns (observation, reward, terminated, truncated, info).
        ``stop`` ends the episode. A pipeline that does not parse, a pass that fails, or (for
        the ``runtime`` reward) a module that does not compile raises ``AxleError`` and leaves
        the state as it was."""
        m = self._require_module()
        name = self._action_name(action)
        if name == "stop":
            self._actions.append(name)
            info = {"action": name, "changed": False, "pass_seconds": 0.0,
                    self.reward_space.name: self._prev, "baseline": self.reward_space.baseline}
            return self._observe(), 0.0, True, False, info
        # A measured metric can fail after the pass succeeded (the module does not compile):
        # the step is undone then, as when the pass fails.
        backup = m.copy() if self.reward_space.name == "runtime" else None
        changed, secs = m.apply(name)
        try:
            cur = self._metric(m)
        except AxleError:
            self._module = backup
            raise
        self._actions.append(name)
        base = self.reward_space.baseline or 1.0
        reward = (self._prev - cur) / base
        self._prev = cur
        info = {"action": name, "changed": changed, "pass_seconds": secs,
                self.reward_space.name: cur, "baseline": self.reward_space.baseline,
                "speedup": base / cur if cur > 0 else math.inf}
        if self.reward_space.name == "runtime":
            info["noise"] = measure(m, self.runtime_config, self._seed).noise
        truncated = len(self._actions) >= self.max_steps
        return self._observe(), float(reward), False, truncated, info

    def render(self):
        """The module as HLO text (render mode ``ansi``)."""
        return self._require_module().hlo_text()

    def close(self):
        """Releases the module."""
        self._module = None
        self._original = None
        self._original_uri = None
        self._reference = None

    # ---- state, replay, fork, validation ---------------------------------------------------

    @property
    def benchmark(self):
        """The current :class:`~axle.gym.datasets.Benchmark`."""
        return self._benchmark

    @property
    def actions(self):
        """The actions taken since ``reset``, by name."""
        return list(self._actions)

    @property
    def state(self):
        """The :class:`EnvState` that :meth:`replay` turns back into this state."""
        self._require_module()
        return EnvState(self._benchmark.uri, self._seed, tuple(self._actions))

    def replay(self, state):
        """Resets to ``state.benchmark`` with ``state.seed`` and takes ``state.actions``;
        returns the last step's (observation, reward, terminated, truncated, info), or reset's
        observation and info (with reward 0) when there are no actions."""
        obs, info = self.reset(benchmark=state.benchmark, seed=state.seed)
        out = (obs, 0.0, False, False, info)
        for a in state.actions:
            out = self.step(a)
        return out

    def fork(self):
        """An independent environment in the same state (same benchmark, seed, actions, module
        and configuration); stepping one does not change the other."""
        self._require_module()
        new = AxleEnv.__new__(AxleEnv)
        new.__dict__.update(self.__dict__)
        new.observation = _Observations(new)
        new.action_space = _spaces.ActionSpace(self.action_space.names)
        new.reward_space = _spaces.RewardSpace(self.reward_space.name,
                                               self.reward_space.description)
        new.reward_space.baseline = self.reward_space.baseline
        new._module = self._module.copy()
        new._actions = list(self._actions)
        new.np_random = np.random.default_rng(self.np_random.integers(2**63))
        return new

    def validate(self):
        """Runs the reference evaluator on the current module and on the benchmark as loaded,
        on the same inputs (drawn from the reset seed: ordinary values with signed zeros,
        infinities, NaN and subnormals), and compares: exact for integers and ``pred``, the
        corpus's tolerances for floats (f64 1e-12, f32 1e-4 relative, 16-bit and narrower 2e-2),
        NaN matching NaN. Returns a :class:`ValidationResult`; raises ``AxleError`` when the
        benchmark itself does not evaluate."""
        m = self._require_module()
        if self._reference is None:
            self._reference = self._original.evaluate(self._seed)
        msg = m.compare(self._reference)
        return ValidationResult(msg is None, msg or "")

    def measure(self):
        """The current module's run time (:class:`Measurement`, cached by module hash)."""
        return measure(self._require_module(), self.runtime_config, self._seed)

    def metric(self, name):
        """The current module's ``insts``, ``cost`` or ``runtime`` (seconds)."""
        if name not in REWARDS:
            raise AxleError(f"unknown metric {name!r}: one of {', '.join(REWARDS)}")
        return self._metric(self._require_module(), name)

    def baseline(self, name):
        """The metric ``name`` of the benchmark after the baseline pipeline."""
        if name not in REWARDS:
            raise AxleError(f"unknown metric {name!r}: one of {', '.join(REWARDS)}")
        self._require_module()
        return self._baseline(name)
