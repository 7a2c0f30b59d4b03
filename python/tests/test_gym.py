"""Tests of axle.gym: spaces, observations, rewards, replay, fork, validation over transitions on
a sample of the corpus, determinism across thread counts, datasets and the search baselines."""

import hashlib
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import axle
import axle.gym as gym
from axle import _axle
from axle.gym import baselines, datasets, leaderboard

SHARED = pathlib.Path(os.environ.get("AXLE_SHARED",
                                     pathlib.Path(__file__).resolve().parents[2].parent / "shared"))
os.environ.setdefault("AXLE_SHARED", str(SHARED))
needs_shared = pytest.mark.skipif(not (SHARED / "corpus").is_dir(),
                                  reason="the shared corpus is not here (AXLE_SHARED)")

# p feeds n and a; n feeds a: three nodes, three data edges.
SMALL = """HloModule small
ENTRY e {
  p = f32[4]{0} parameter(0)
  n = f32[4]{0} negate(p)
  ROOT a = f32[4]{0} add(n, p)
}
"""

# Foldable and fusable: constant arithmetic, a broadcast chain and a reduction.
FOLDABLE = """HloModule foldable
add_f32 {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[16,32]{1,0} parameter(0)
  c1 = f32[] constant(1)
  c2 = f32[] constant(2)
  c3 = f32[] add(c1, c2)
  b = f32[16,32]{1,0} broadcast(c3), dimensions={}
  m = f32[16,32]{1,0} multiply(p, b)
  e1 = f32[16,32]{1,0} exponential(m)
  z = f32[] constant(0)
  r = f32[16]{0} reduce(e1, z), dimensions={1}, to_apply=add_f32
  i = s32[16]{0} iota(), iota_dimension=0
  ic = f32[16]{0} convert(i)
  ri = f32[16]{0} add(r, ic)
  n = f32[16]{0} negate(ri)
  ROOT t = (f32[16]{0}, f32[16,32]{1,0}) tuple(n, e1)
}
"""


def dump_file(tmp_path, text, name="m.before_optimizations.txt"):
    p = tmp_path / name
    p.write_text(text)
    return f"dump:{p}"


def test_actions_name_every_pass_once_with_stop_first():
    names = gym.action_names()
    assert names[0] == "stop"
    assert len(set(names)) == len(names)
    for p in axle.passes.pass_names():
        assert p in names
    assert "fusion{target=gpu}" in names
    env = gym.AxleEnv()
    assert env.action_space.n == len(names)
    assert env.action_space[env.action_space.index("cse")] == "cse"


def test_graph_csr_of_a_known_module(tmp_path):
    env = gym.AxleEnv(dump_file(tmp_path, SMALL),
                      observation_space=["graph", "opcode_counts", "features", "hlo"])
    obs, _ = env.reset()
    assert env.observation_space.contains(obs)
    g = obs["graph"]
    ops = [gym.OPCODES[k] for k in g["opcode"]]
    assert ops == ["parameter", "negate", "add"]
    assert g["indptr"].tolist() == [0, 2, 3, 3]
    assert g["indices"].tolist() == [1, 2, 2]
    assert g["edge_type"].tolist() == [0, 0, 0]
    assert [gym.ELEMENT_TYPES[k] for k in g["element_type"]] == ["f32"] * 3
    assert g["elements"].tolist() == [4, 4, 4]
    assert g["rank"].tolist() == [1, 1, 1] and g["dims"].tolist() == [4, 4, 4]
    assert g["result_bytes"].tolist() == [16.0] * 3
    # negate and add: one flop per element; bytes are the result and the operands.
    assert g["flops"].tolist() == [0.0, 4.0, 4.0]
    assert g["bytes"].tolist() == [0.0, 32.0, 48.0]
    counts = dict(zip(gym.OPCODES, obs["opcode_counts"]))
    assert (counts["parameter"], counts["negate"], counts["add"]) == (1, 1, 1)
    assert obs["opcode_counts"].sum() == 3
    feats = dict(zip(gym.COST_FEATURES, obs["features"]))
    assert feats["instructions"] == 3 and feats["flops"] == 8.0 and feats["bytes"] == 80.0
    assert feats["cost"] == 8.0 + 6 * 80.0
    assert "negate" in obs["hlo"]


def test_called_computation_roots_feed_their_callers(tmp_path):
    env = gym.AxleEnv(dump_file(tmp_path, FOLDABLE), observation_space="graph")
    g, _ = env.reset()
    ops = [gym.OPCODES[k] for k in g["opcode"]]
    reduce_node = ops.index("reduce")
    # Dimensions one node after another: the reduce's f32[16] follows its operands' shapes.
    offsets = np.concatenate([[0], np.cumsum(g["rank"])])
    assert g["dims"][offsets[reduce_node]:offsets[reduce_node + 1]].tolist() == [16]
    assert g["dims"][offsets[ops.index("multiply")]:offsets[ops.index("multiply") + 1]].tolist() \
        == [16, 32]
    calls = [(s, int(g["indices"][k])) for s in range(len(ops))
             for k in range(g["indptr"][s], g["indptr"][s + 1]) if g["edge_type"][k] == 1]
    assert len(calls) == 1
    src, dst = calls[0]
    assert dst == reduce_node and g["computation"][src] != 0 and g["computation"][dst] == 0


def test_rewards_are_deltas_normalised_to_the_default_pipeline(tmp_path):
    env = gym.AxleEnv(dump_file(tmp_path, FOLDABLE), reward_space="cost")
    _, info = env.reset()
    initial = info["cost"]
    baseline = env.reward_space.baseline
    assert baseline == info["baseline"] > 0 and baseline < initial
    total = 0.0
    for a in ["constant-folding", "algsimp", "dce", "fusion"]:
        _, r, term, trunc, info = env.step(a)
        total += r
        assert not term and not trunc
    assert total == pytest.approx((initial - info["cost"]) / baseline)
    # The default pipeline, given as pipeline text, reaches the baseline exactly.
    env.reset()
    _, r, _, _, info = env.step(env.baseline_pipeline)
    assert info["speedup"] == 1.0
    assert r == pytest.approx((initial - baseline) / baseline)
    _, r, term, _, _ = env.step("stop")
    assert term and r == 0.0


def test_insts_reward_and_truncation(tmp_path):
    env = gym.AxleEnv(dump_file(tmp_path, FOLDABLE), reward_space="insts", max_steps=2)
    _, info = env.reset()
    n0 = info["insts"]
    _, r, _, trunc, _ = env.step("constant-folding")
    assert not trunc
    # Folding leaves the folded constants' operands dead; dce removes them.
    _, r2, _, trunc, info = env.step("dce")
    assert trunc and info["insts"] < n0
    assert r + r2 == pytest.approx((n0 - info["insts"]) / info["baseline"])


def test_bad_input_raises_and_keeps_the_state(tmp_path):
    env = gym.AxleEnv(dump_file(tmp_path, FOLDABLE))
    with pytest.raises(axle.AxleError, match="reset"):
        env.step(1)
    env.reset()
    env.step("algsimp")
    before = env.observation["hlo"]
    for bad in ["no-such-pass", "fusion{target=tpu}", "fixpoint[cse"]:
        with pytest.raises(axle.AxleError):
            env.step(bad)
    with pytest.raises(axle.AxleError, match="outside"):
        env.step(env.action_space.n)
    with pytest.raises(axle.AxleError):
        env.step(1.5)
    assert env.observation["hlo"] == before and env.actions == ["algsimp"]
    with pytest.raises(axle.AxleError, match="unknown observation"):
        gym.AxleEnv(observation_space="pixels")
    with pytest.raises(axle.AxleError, match="unknown reward"):
        gym.AxleEnv(reward_space="speed")
    with pytest.raises(axle.AxleError, match="threads"):
        gym.AxleEnv(threads=0)
    with pytest.raises(axle.AxleError):
        env.reset(benchmark=dump_file(tmp_path, "HloModule x\nENTRY e { ROOT p = f32[ }",
                                      "bad.txt"))
    assert env.state.benchmark.endswith("m.before_optimizations.txt")
    assert env.observation["hlo"] == before
    with pytest.raises(axle.AxleError, match="DATASET/NAME"):
        datasets.benchmark("nothing")
    with pytest.raises(axle.AxleError, match="SEED"):
        datasets.benchmark("generated/x")


def test_state_replays_exactly_and_fork_is_independent(tmp_path):
    uri = dump_file(tmp_path, FOLDABLE)
    env = gym.AxleEnv(uri, observation_space=["hlo", "features"])
    env.reset(seed=3)
    for a in ["algsimp", "constant-folding", "fusion", "dce"]:
        last = env.step(a)
    st = gym.EnvState.from_json(env.state.to_json())
    assert st == env.state and st.seed == 3 and st.benchmark == uri
    other = gym.AxleEnv(observation_space=["hlo", "features"])
    obs, r, _, _, info = other.replay(st)
    assert obs["hlo"] == last[0]["hlo"]
    assert np.array_equal(obs["features"], last[0]["features"]) and r == last[1]
    f = env.fork()
    f.step("multi-output-fusion")
    f.step("memory-schedule")
    assert env.actions == ["algsimp", "constant-folding", "fusion", "dce"]
    assert f.actions[-2:] == ["multi-output-fusion", "memory-schedule"]
    assert env.observation["hlo"] == last[0]["hlo"]


def _trajectory(uri, threads, actions):
    env = gym.AxleEnv(uri, observation_space=["opcode_counts", "features", "graph", "hlo"],
                      reward_space="cost", threads=threads)
    out = [env.reset(seed=1)[0]]
    rewards = []
    for a in actions:
        obs, r, *_ = env.step(a)
        out.append(obs)
        rewards.append(r)
    return out, rewards


@needs_shared
def test_same_actions_give_the_same_observations_at_any_thread_count():
    names = gym.action_names()[1:]
    rng = np.random.default_rng(7)
    for uri in ["corpus/layernorm_rmsnorm", "generated/11"]:
        actions = [names[k] for k in rng.integers(len(names), size=10)] + ["fusion"]
        a, ra = _trajectory(uri, 1, actions)
        b, rb = _trajectory(uri, 3, actions)
        assert ra == rb
        for x, y in zip(a, b):
            assert x["hlo"] == y["hlo"]
            assert np.array_equal(x["opcode_counts"], y["opcode_counts"])
            assert np.array_equal(x["features"], y["features"])
            for k in x["graph"]:
                assert np.array_equal(x["graph"][k], y["graph"][k])


@needs_shared
def test_every_transition_on_the_corpus_validates():
    # Every corpus program, each through a random sequence and the default pipeline, validated
    # after every step.
    uris = datasets.dataset("corpus").uris()
    names = gym.action_names()[1:]
    rng = np.random.default_rng(0)
    steps = 0
    for uri in uris:
        env = gym.AxleEnv(uri)
        env.reset(seed=2)
        for a in [names[k] for k in rng.integers(len(names), size=6)] + [env.baseline_pipeline]:
            env.step(a)
            v = env.validate()
            assert v.ok, f"{uri} after {env.actions}: {v.message}"
            steps += 1
    assert steps == 7 * len(uris) >= 7 * 39


def test_validate_finds_a_different_module():
    a = _axle.GymModule(SMALL)
    b = _axle.GymModule(SMALL.replace("negate(p)", "abs(p)"))
    ref = a.evaluate(5)
    assert a.compare(ref) is None
    msg = b.compare(ref)
    assert msg is not None and "result 0" in msg


def test_runtime_reward_is_measured_once_per_module(tmp_path):
    cfg = gym.RuntimeConfig(threads=1, warmup=1, repeat=3)
    env = gym.AxleEnv(dump_file(tmp_path, FOLDABLE), reward_space="runtime", runtime=cfg)
    _, info = env.reset()
    assert info["runtime"] > 0 and info["baseline"] > 0
    m1 = env.measure()
    assert len(m1.times) == 3 and m1.noise >= 0 and m1.compile_seconds > 0
    _, r, _, _, info = env.step("algsimp")
    assert "noise" in info and info["runtime"] > 0
    # Back to the start: the same module, measured before, comes from the cache.
    env.reset()
    assert env.measure() is m1
    f = env.fork()
    assert f.measure() is m1


def test_runtime_with_a_cache_dir_keeps_kernels_for_later_states(tmp_path):
    cache = tmp_path / "cache"
    cfg = gym.RuntimeConfig(threads=1, warmup=1, repeat=3, cache_dir=str(cache))
    env = gym.AxleEnv(dump_file(tmp_path, FOLDABLE), reward_space="runtime", runtime=cfg)
    env.reset()
    env.step("algsimp")
    assert env.measure().median > 0
    kernels = list((cache / "cpu-kernels").glob("*.axc"))
    assert kernels, "kernel modules are kept in the cache directory"


def test_generated_programs_are_seeded():
    a, b = _axle.generated_hlo(3), _axle.generated_hlo(3)
    assert a == b and a != _axle.generated_hlo(4)
    env = gym.AxleEnv("generated/3", observation_space="hlo")
    obs, _ = env.reset()
    assert obs == axle.passes.Session(a).hlo_text()
    with pytest.raises(axle.AxleError):
        _axle.generated_hlo(1, 0)


@needs_shared
def test_dataset_splits_are_fixed_and_partition_each_dataset():
    for name in ["corpus", "models", "large"]:
        d = datasets.dataset(name)
        train, test = d.uris("train"), d.uris("test")
        assert sorted(train + test) == sorted(d.uris()) and not set(train) & set(test)
        for u in d.uris():
            h = int.from_bytes(hashlib.sha256(u.encode()).digest()[:8], "little")
            assert (h % 4 == 0) == (u in test)
    corpus = datasets.dataset("corpus")
    assert len(corpus) == len(json.loads((SHARED / "corpus/manifest.json").read_text())["cases"])
    assert corpus.uris("test") and corpus.uris("train")
    assert all(not u.endswith((".opt", ".debug")) for u in corpus.uris())
    models = datasets.dataset("models")
    assert len(models) == len([p for p in (SHARED / "models").glob("*.hlo")
                               if not p.name.endswith(".opt.hlo")])
    assert "large/large_wide_10k" in datasets.dataset("large").uris()
    assert len(datasets.dataset("generated").uris()) == 200
    with pytest.raises(axle.AxleError, match="split"):
        corpus.uris("validation")


def test_dump_directory_loader(tmp_path):
    (tmp_path / "module_0001.jit_f.before_optimizations.txt").write_text(SMALL)
    (tmp_path / "module_0001.jit_f.cpu_after_optimizations.txt").write_text(SMALL)
    (tmp_path / "module_0002.jit_g.before_optimizations.txt").write_text(FOLDABLE)
    d = datasets.dataset(str(tmp_path))
    assert [pathlib.Path(u[5:]).name for u in d.uris()] == [
        "module_0001.jit_f.before_optimizations.txt",
        "module_0002.jit_g.before_optimizations.txt"]
    env = gym.AxleEnv(d.uris()[1], observation_space="features")
    obs, _ = env.reset()
    assert obs[0] == 17
    # A directory of plain HLO text files (HloEnv's layout) when nothing was dumped by XLA.
    other = tmp_path / "hloenv"
    other.mkdir()
    (other / "a.hlo").write_text(SMALL)
    (other / "b.txt").write_text(FOLDABLE)
    assert len(datasets.dataset(str(other))) == 2


def test_searches_improve_and_replay(tmp_path):
    uri = dump_file(tmp_path, FOLDABLE)
    env = gym.AxleEnv(uri, reward_space="cost")
    _, info = env.reset()
    start = info["cost"]
    results = {}
    for name, search in baselines.SEARCHES.items():
        r = search(env, metric="cost", budget=60, seed=1)
        assert r.steps <= 60 and r.value <= start
        env.replay(r.state)
        assert env.metric("cost") == r.value
        results[name] = r
    assert results["default"].value == env.baseline("cost")
    assert results["greedy"].value < start and results["random"].value < start
    again = baselines.random_search(env, metric="cost", budget=60, seed=1)
    assert again.actions == results["random"].actions


def test_leaderboard_scores_the_default_at_one(tmp_path):
    uris = [dump_file(tmp_path, FOLDABLE), dump_file(tmp_path, SMALL, "small.txt")]
    rows = leaderboard.run(uris, ["default", "greedy"], budget=40, score="cost", validate=True)
    assert len(rows) == 4 and all(r["error"] is None and r["valid"] for r in rows)
    assert all(r["speedup"] == 1.0 for r in rows if r["method"] == "default")
    md = leaderboard.markdown(rows, "cost")
    assert "| default | 1.000 |" in md and "| greedy |" in md and uris[0] in md


def test_leaderboard_measures_runtime_after_the_searches(tmp_path):
    cfg = gym.RuntimeConfig(threads=1, warmup=1, repeat=3)
    uri = dump_file(tmp_path, FOLDABLE)
    rows = leaderboard.run([uri], ["default", "greedy"], budget=40, score="runtime",
                           runtime=cfg, rounds=2)
    assert [r["method"] for r in rows] == ["default", "greedy"]
    d, g = rows
    # The default's final module is the baseline's: one measurement scores both.
    assert d["speedup"] == 1.0 and d["score"] == d["baseline"] > 0
    assert g["error"] is None and g["score"] > 0 and g["speedup"] == d["baseline"] / g["score"]


def test_spaces_without_gymnasium():
    code = ("import sys; sys.modules['gymnasium'] = None\n"
            "import axle.gym as g\n"
            "assert not g.spaces.have_gymnasium()\n"
            "e = g.AxleEnv('generated/2', observation_space=['features', 'opcode_counts'])\n"
            "o, _ = e.reset(seed=0)\n"
            "assert e.observation_space.contains(o), o\n"
            "a = e.action_space.sample()\n"
            "assert e.action_space.contains(a)\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ))
    assert out.stdout.strip() == "ok", out.stderr


def test_gymnasium_interfaces_where_installed():
    gymnasium = pytest.importorskip("gymnasium")
    env = gym.AxleEnv("generated/5")
    assert isinstance(env, gymnasium.Env)
    assert isinstance(env.action_space, gymnasium.spaces.Discrete)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    from gymnasium.utils.env_checker import check_env
    check_env(env, skip_render_check=True)  # raises on a broken interface


def test_spearman_and_fit():
    from axle.gym import calibrate
    assert calibrate.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert calibrate.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # Ties take their mean rank: ranks (1.5, 1.5, 3) against (1, 2, 3).
    assert calibrate.spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(np.corrcoef(
        [1.5, 1.5, 3], [1, 2, 3])[0, 1])
    rng = np.random.default_rng(0)
    w = (2e-10, 3e-9, 5e-11, 1e-7)
    rows = []
    for _ in range(50):
        r = {"flops": float(rng.integers(1, 1e6)), "transcendentals": float(rng.integers(0, 1e4)),
             "bytes": float(rng.integers(1, 1e7)), "calls": float(rng.integers(1, 4))}
        r["seconds"] = sum(wk * r[t] for wk, t in zip(w, calibrate.TERMS))
        rows.append(r)
    assert calibrate.fit(rows) == pytest.approx(w, rel=1e-6)


def test_kernel_costs_pair_kernels_with_predictions(tmp_path, monkeypatch):
    from axle.gym import calibrate
    rows = _axle.kernel_costs(FOLDABLE, "cpu", 1, 1, 2, 0)
    assert rows and all(secs > 0 and calls == 1.0 for _, _, calls, secs, *_ in rows)
    assert all(not np.isnan(fl) and by > 0 for *_, fl, _, by in rows)
    assert sum(tr for *_, tr, _ in rows) == 512.0  # one exponential per element of e1
    monkeypatch.setenv("AXLE_CALIBRATION_DIR", str(tmp_path))
    assert calibrate.load() is None
    calibrate.save((1e-9, 1e-8, 1e-10, 1e-6))
    w = calibrate.load()
    env = gym.AxleEnv(dump_file(tmp_path, FOLDABLE), cost_weights=w)
    _, info = env.reset()
    m = _axle.GymModule(FOLDABLE)
    f = dict(zip(gym.COST_FEATURES, np.frombuffer(m.cost_features(), np.float64)))
    assert m.kernels() == 9  # the entry's instructions but the parameter, constants and tuple
    assert info["cost"] == pytest.approx(f["flops"] * 1e-9 + f["transcendentals"] * 1e-8
                                         + f["bytes"] * 1e-10 + 9 * 1e-6)
    with pytest.raises(axle.AxleError, match="cost_weights"):
        gym.AxleEnv(cost_weights=(1, 2))


def test_parallel_environments_match_sequential_ones():
    gymnasium = pytest.importorskip("gymnasium")
    fns = [lambda u=u: gym.make(u, observation_space="features")
           for u in ["generated/3", "generated/4"]]
    actions = [gym.action_names().index(a) for a in ["algsimp", "fusion", "dce"]]
    out = []
    # "spawn": a forked child inherits rayon's thread pool without its threads and hangs.
    for vec in (lambda f: gymnasium.vector.AsyncVectorEnv(f, context="spawn"),
                gymnasium.vector.SyncVectorEnv):
        v = vec(fns)
        obs, _ = v.reset(seed=[0, 0])
        trace = [obs]
        for a in actions:
            obs, r, *_ = v.step(np.array([a, a]))
            trace += [obs, r]
        v.close()
        out.append(trace)
    for x, y in zip(*out):
        assert np.array_equal(x, y)
