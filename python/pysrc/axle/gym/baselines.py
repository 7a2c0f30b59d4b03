"""Search baselines for :mod:`axle.gym`: the backend's default pipeline, random search, greedy
search (one-step lookahead) and a small evolutionary search.

Each search runs on an :class:`~axle.gym.AxleEnv` already reset on a benchmark, minimizes the
env's metric ``metric`` (``insts``, ``cost`` or ``runtime``; the cheap ``cost`` by default),
spends at most ``budget`` pass applications, and returns a :class:`SearchResult`: the best
action sequence found (an :class:`~axle.gym.EnvState` replays it) and its metric. The searches
are deterministic for a seed.
"""

import dataclasses
import time

import numpy as np

from .env import EnvState

__all__ = ["SearchResult", "default_pipeline", "evolution", "greedy", "random_search", "SEARCHES"]


@dataclasses.dataclass(frozen=True)
class SearchResult:
    """The best ``actions`` found for ``benchmark`` (replay with ``state``), their ``value``
    of the metric, the pass applications spent (``steps``) and the search's ``seconds``."""

    benchmark: str
    seed: int
    actions: tuple
    value: float
    steps: int
    seconds: float

    @property
    def state(self):
        """The :class:`~axle.gym.EnvState` of the best sequence."""
        return EnvState(self.benchmark, self.seed, self.actions)


def _start(env):
    st = env.state
    env.replay(EnvState(st.benchmark, st.seed, ()))
    return st


def _pass_actions(env):
    return [n for n in env.action_space.names if n != "stop"]


def default_pipeline(env, metric="cost", budget=None, seed=0):
    """The backend's default pipeline as one action (``budget`` and ``seed`` are unused)."""
    t = time.perf_counter()
    st = _start(env)
    env.step(env.baseline_pipeline)
    return SearchResult(st.benchmark, st.seed, (env.baseline_pipeline,), env.metric(metric), 1,
                        time.perf_counter() - t)


def _run(env, base, actions, metric):
    """Applies ``actions`` to a fork of ``base``; returns the metric after each."""
    e = base.fork()
    vals = []
    for a in actions:
        e.step(a)
        vals.append(e.metric(metric))
    return vals


def random_search(env, metric="cost", budget=200, seed=0, episode_length=16):
    """Episodes of ``episode_length`` uniformly random passes; keeps the best prefix seen."""
    t = time.perf_counter()
    st = _start(env)
    base = env.fork()
    rng = np.random.default_rng(seed)
    names = _pass_actions(env)
    best, best_actions, steps = env.metric(metric), (), 0
    while steps < budget:
        n = min(episode_length, budget - steps)
        seq = [names[k] for k in rng.integers(len(names), size=n)]
        vals = _run(env, base, seq, metric)
        steps += n
        k = int(np.argmin(vals))
        if vals[k] < best:
            best, best_actions = vals[k], tuple(seq[: k + 1])
    return SearchResult(st.benchmark, st.seed, best_actions, best, steps,
                        time.perf_counter() - t)


def greedy(env, metric="cost", budget=200, seed=0):
    """From the start, tries every pass on a fork and takes the one with the lowest metric (the
    first in action order among equals), while it improves; ``seed`` is unused (deterministic)."""
    t = time.perf_counter()
    st = _start(env)
    names = _pass_actions(env)
    cur = env.fork()
    best, actions, steps = cur.metric(metric), [], 0
    while steps + len(names) <= budget:
        scored = []
        for a in names:
            e = cur.fork()
            e.step(a)
            scored.append((e.metric(metric), a, e))
            steps += 1
        v, a, e = min(scored, key=lambda x: x[0])
        if not v < best:
            break
        best, cur = v, e
        actions.append(a)
    return SearchResult(st.benchmark, st.seed, tuple(actions), best, steps,
                        time.perf_counter() - t)


def evolution(env, metric="cost", budget=200, seed=0, population=8, length=12):
    """A (mu + lambda) evolutionary search over action sequences of up to ``length`` passes:
    the better half of the population survives, each survivor makes one child by replacing,
    inserting or deleting one pass, and every sequence is scored by its best prefix."""
    t = time.perf_counter()
    st = _start(env)
    base = env.fork()
    rng = np.random.default_rng(seed)
    names = _pass_actions(env)
    steps = 0

    def score(seq):
        nonlocal steps
        vals = _run(env, base, seq, metric) if seq else [base.metric(metric)]
        steps += max(1, len(seq))
        k = int(np.argmin(vals))
        return vals[k], tuple(seq[: k + 1])

    def rand_seq():
        return [names[k] for k in rng.integers(len(names), size=length)]

    pop = []
    for _ in range(population):
        if steps + length > budget:
            break
        pop.append(score(rand_seq()))
    if not pop:
        return SearchResult(st.benchmark, st.seed, (), base.metric(metric), 0,
                            time.perf_counter() - t)
    while True:
        pop.sort(key=lambda x: (x[0], len(x[1])))
        parents = pop[: max(1, len(pop) // 2)]
        children = []
        for _, seq in parents:
            seq = list(seq)
            op = rng.integers(3)
            pos = int(rng.integers(len(seq) + 1))
            if op == 0 and seq:
                seq[min(pos, len(seq) - 1)] = names[int(rng.integers(len(names)))]
            elif op == 1 and len(seq) < length:
                seq.insert(pos, names[int(rng.integers(len(names)))])
            elif seq:
                del seq[min(pos, len(seq) - 1)]
            if steps + max(1, len(seq)) > budget:
                break
            children.append(score(seq))
        if not children:
            break
        pop = parents + children
    best = min(pop, key=lambda x: (x[0], len(x[1])))
    return SearchResult(st.benchmark, st.seed, best[1], best[0], steps, time.perf_counter() - t)


#: The searches by name, as the leaderboard runs them.
SEARCHES = {"default": default_pipeline, "random": random_search, "greedy": greedy,
            "evolution": evolution}
