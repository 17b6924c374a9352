"""The CQL-SAC step, td against gitd, and against another checkout (docs/benchmarks.md#the-update-itself).

Run by hand (speed is never asserted by a test):

    .venv/bin/python -m benchmarks.continuous_step
    .venv/bin/python -m benchmarks.continuous_step --compare-with /path/to/older/checkout --rounds 7

The D4RL-sized step the paper's continuous runs take: 17-dimensional observations, 6-dimensional
actions, critic and actor 256 x 256, batch 256, CQL(H) with 10 proposed actions of each kind, one
seed; td and gitd (K = 5). Each (tree, critic) program runs in a process of its own (the tree's
package on ``PYTHONPATH``) that times ``--updates`` scanned updates per call; the processes of a round
run one after the other and the rounds interleave, so load from other processes falls on all alike.
It prints ms per update (median and best of the rounds), gitd / td in time and in FLOPs (XLA's cost
analysis of the compiled program), and each tree's step over this tree's.

``--anchor-corl PATH/algos/cql.py`` adds JAX-CORL's CQL (a checkout of github.com/nissymori/JAX-CORL,
read at run time, nothing of it copied here) as one more program of each round, run by
``--anchor-python`` (an environment with its needs: jax, flax, optax, distrax, pydantic, omegaconf).
Its d4rl, gym and wandb imports get empty stand-ins, and it trains on random data of the same shapes
with its own defaults (twin critics 256x256, batch 256, 10 CQL actions, ``n_jitted_updates`` 8 updates
per compiled call, as shipped). It is listed as the tree ``JAX-CORL``, critic ``td``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OBS_DIM, ACT_DIM, BATCH = 17, 6, 256

# runs inside a child process with one tree's package importable
CHILD = """
import json, sys, time
import jax, jax.numpy as jnp, numpy as np
from offline_gitd.batch import Batch
from offline_gitd.critics import CriticConfig
from offline_gitd.learners.drivers import choose_compiler_options
from offline_gitd.learners.family import make_continuous_family
kind, updates, calls, obs_dim, act_dim, batch = sys.argv[1], *map(int, sys.argv[2:7])
critic = CriticConfig(kind=kind, K=None if kind in ("td", "tdrc") else 5, T=1)
bounds = (np.full(act_dim, -1.0), np.full(act_dim, 1.0))
family = make_continuous_family(critic, act_dim, np.zeros((1, obs_dim), np.float32), bounds,
    mlp_hidden=(256, 256), lr=3e-4, adam_eps=1e-8, cql_alpha=5.0)
rng = np.random.default_rng(0)
lead = (updates, batch)
batches = jax.device_put(Batch(
    obs=rng.normal(size=(*lead, obs_dim)).astype(np.float32),
    action=rng.uniform(-1, 1, (*lead, act_dim)).astype(np.float32),
    reward=rng.normal(size=lead).astype(np.float32),
    discount=np.full(lead, 0.99, np.float32),
    next_obs=rng.normal(size=(*lead, obs_dim)).astype(np.float32),
    weight=np.ones(lead, np.float32)))
program = jax.jit(lambda s, b: jax.lax.scan(family.step, s, b), compiler_options=choose_compiler_options() or None)
state = jax.jit(family.init)(jax.random.PRNGKey(0))
compiled = program.lower(state, batches).compile()
cost = compiled.cost_analysis()
cost = cost[0] if isinstance(cost, list) else cost
state, aux = program(state, batches)
jax.block_until_ready(aux)
times = []
for _ in range(calls):
    start = time.perf_counter()
    state, aux = program(state, batches)
    jax.block_until_ready((state, aux))
    times.append((time.perf_counter() - start) / updates)
# XLA's cost analysis counts a loop body once: the scanned program's FLOPs are one update's
print(json.dumps({"seconds": min(times), "flops": cost.get("flops", 0.0)}))
"""


# runs JAX-CORL's CQL (argv: its cql.py, updates per timed call, calls, obs dim, action dim) in its own environment
ANCHOR_CHILD = """
import importlib.util, json, sys, time, types
class StandIn(types.ModuleType):  # any attribute (gym.Env in its annotations) is a plain type
    def __getattr__(self, attribute):
        return object
for name in ("d4rl", "gym", "wandb"):  # imported at its top, used only to load D4RL, make envs and log
    sys.modules[name] = StandIn(name)
path, updates, calls, obs_dim, act_dim = sys.argv[1], *map(int, sys.argv[2:6])
sys.argv = sys.argv[:1]  # its config reads the command line
spec = importlib.util.spec_from_file_location("jax_corl_cql", path)
cql = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cql)
import jax, numpy as np
config = cql.config
config.action_dim = act_dim
config.target_entropy = -float(act_dim)
rng = np.random.default_rng(0)
rows = 100_000
data = cql.Transition(
    observations=rng.normal(size=(rows, obs_dim)).astype(np.float32),
    actions=rng.uniform(-0.99, 0.99, (rows, act_dim)).astype(np.float32),
    rewards=rng.normal(size=rows).astype(np.float32),
    next_observations=rng.normal(size=(rows, obs_dim)).astype(np.float32),
    dones=np.zeros(rows, np.float32))
data = jax.device_put(data)
state = cql.create_cql_train_state(jax.random.PRNGKey(0), data.observations[0], data.actions[0], config)
update = jax.jit(cql.CQL.update_n_times, static_argnums=(3,))
key = jax.random.PRNGKey(1)
cost = update.lower(state, data, key, config).compile().cost_analysis()
cost = cost[0] if isinstance(cost, list) else cost
state, metrics = update(state, data, key, config)
jax.block_until_ready(metrics)
per_call = config.n_jitted_updates
times = []
for _ in range(calls):
    start = time.perf_counter()
    for _ in range(max(1, updates // per_call)):
        key, sub = jax.random.split(key)
        state, metrics = update(state, data, sub, config)
    jax.block_until_ready((state, metrics))
    times.append((time.perf_counter() - start) / (max(1, updates // per_call) * per_call))
# its updates are unrolled in one program: the FLOPs of all of them, counted once
print(json.dumps({"seconds": min(times), "flops": cost.get("flops", 0.0) / per_call}))
"""


def time_anchor(python: str, cql_path: Path, updates: int, calls: int) -> dict[str, float]:
    """Seconds per update and FLOPs per update of JAX-CORL's CQL, in its own environment."""
    args = [str(cql_path), str(updates), str(calls), str(OBS_DIM), str(ACT_DIM)]
    out = subprocess.run([python, "-c", ANCHOR_CHILD, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def time_step(tree: Path, kind: str, updates: int, calls: int) -> dict[str, float]:
    """Seconds per update (best of ``calls`` calls) and FLOPs per update of ``tree``'s step."""
    args = [kind, str(updates), str(calls), str(OBS_DIM), str(ACT_DIM), str(BATCH)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", CHILD, *args], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--critics", default="td,gitd")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--updates", type=int, default=20, help="updates per timed call")
    parser.add_argument("--calls", type=int, default=3, help="timed calls per process (the best counts)")
    parser.add_argument("--compare-with", type=Path, default=None, help="another checkout's root")
    parser.add_argument("--anchor-corl", type=Path, default=None, help="JAX-CORL's algos/cql.py, timed as an anchor")
    parser.add_argument("--anchor-python", default=sys.executable, help="the Python of the anchor's environment")
    args = parser.parse_args()
    trees = {"this tree": ROOT} | ({"compared": args.compare_with.resolve()} if args.compare_with else {})
    critics = args.critics.split(",")
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; CQL-SAC 256x256, batch {BATCH}, one seed")
    results: dict[tuple[str, str], list[dict[str, float]]] = {(t, k): [] for t in trees for k in critics}
    if args.anchor_corl:
        results["JAX-CORL", "td"] = []
    for _ in range(args.rounds):
        for tree_name, tree in trees.items():
            for kind in critics:
                results[tree_name, kind].append(time_step(tree, kind, args.updates, args.calls))
        if args.anchor_corl:
            anchor = time_anchor(args.anchor_python, args.anchor_corl.resolve(), args.updates, args.calls)
            results["JAX-CORL", "td"].append(anchor)
    median = {key: statistics.median(r["seconds"] for r in runs) for key, runs in results.items()}
    print(f"{'tree':10} {'critic':6} | {'ms/update':>9} {'best':>7} {'GFLOP':>7} {'GFLOP/s':>8} | {'/ this tree':>11}")
    for (tree_name, kind), runs in results.items():
        best, flops = min(r["seconds"] for r in runs), runs[0]["flops"]
        own = median.get(("this tree", kind))
        ratio = f"{median[tree_name, kind] / own:>11.2f}" if own else f"{'-':>11}"
        print(
            f"{tree_name:10} {kind:6} | {median[tree_name, kind] * 1e3:>9.2f} {best * 1e3:>7.2f} {flops / 1e9:>7.2f}"
            f" {flops / median[tree_name, kind] / 1e9:>8.1f} | {ratio}"
        )
    if {"td", "gitd"} <= set(critics):
        for tree_name in trees:  # the anchor has no gitd
            time_ratio = median[tree_name, "gitd"] / median[tree_name, "td"]
            flop_ratio = results[tree_name, "gitd"][0]["flops"] / results[tree_name, "td"][0]["flops"]
            print(f"{tree_name}: gitd / td {time_ratio:.2f} in time, {flop_ratio:.2f} in FLOPs")
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
