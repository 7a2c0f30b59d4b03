"""``axle.gym``: a pass-ordering research environment (CompilerGym's interface, gymnasium's
``reset``/``step`` where it fits) over Axle's pass registry.

>>> import axle.gym
>>> env = axle.gym.make(benchmark="corpus/softmax_f32", reward_space="cost")
>>> obs, info = env.reset(seed=0)
>>> obs, reward, terminated, truncated, info = env.step(env.action_space.index("fusion"))

- **Actions** (:func:`action_names`): ``stop`` (ends the episode), then every registered pass
  with its default options, then passes with one option changed (``fusion{target=gpu}``,
  ``constant-folding{max_elements=4096}``). ``step`` also takes a name or any pipeline text.
- **Observations** (``observation_space`` names; ``env.observation[name]`` computes any of them
  on demand): ``opcode_counts`` (int64, one per opcode of :data:`OPCODES`), ``features``
  (float64, :data:`COST_FEATURES`: instructions, computations, fusions, and the cost model's
  flops, transcendentals, bytes and scalar cost), ``hlo`` (the module as text), ``graph`` (CSR
  arrays for a GNN; :class:`~axle.gym.spaces.CsrGraphSpace`). Arrays are read-only NumPy
  views of bytes computed in Rust.
- **Rewards** (``reward_space``): ``insts``, ``cost`` (cheap: computed from the module) and
  ``runtime`` (compile, warm up, repeat, median, fixed threads: :class:`RuntimeConfig`; cached
  by module hash, so a state seen before costs nothing). A step's reward is ``(before - after)
  / baseline``, the baseline being the metric after the backend's default pipeline; ``info``
  carries the metric, the baseline and ``speedup = baseline / metric``, and for ``runtime`` the
  measurement's relative ``noise``.
- ``env.state`` (:class:`EnvState`: benchmark, seed, actions) replays exactly with
  ``env.replay(state)``; ``env.fork()`` copies an environment; ``env.validate()`` compares the
  evaluator's results of the current module with the original's.
- Same benchmark, seed and actions give the same observations and cheap rewards at any thread
  count (``threads=``), as every pass does.

Datasets are in :mod:`axle.gym.datasets`, search baselines in :mod:`axle.gym.baselines`, the
leaderboard in :mod:`axle.gym.leaderboard` (``python -m axle.gym.leaderboard``), the cost model
checked against measured kernel times and fitted per host in :mod:`axle.gym.calibrate`
(``python -m axle.gym.calibrate``).
"""

from . import datasets, spaces
from .env import (COST_FEATURES, ELEMENT_TYPES, OBSERVATIONS, OPCODES, REWARDS, AxleEnv,
                  EnvState, Measurement, RuntimeConfig, ValidationResult, action_names, measure)

__all__ = ["AxleEnv", "COST_FEATURES", "ELEMENT_TYPES", "EnvState", "Measurement", "OBSERVATIONS",
           "OPCODES", "REWARDS", "RuntimeConfig", "ValidationResult", "action_names", "datasets",
           "make", "measure", "spaces"]


def make(benchmark=None, **kwargs):
    """An :class:`AxleEnv` (the keyword arguments are its constructor's)."""
    return AxleEnv(benchmark, **kwargs)
