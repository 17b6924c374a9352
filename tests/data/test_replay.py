"""Replay against a brute-force reference: stacking, n-step targets, sampling, PER, sum tree, p%."""

import numpy as np
import pytest

from offline_gitd.data.episode_store import EpisodeStore, SegmentedRows, first_fraction
from offline_gitd.data.replay import Replay
from offline_gitd.data.sumtree import SumTree

GAMMA = 0.9

# (rows, terminal at the last row, final observation stored as its own row)
#   RLU truncated: last row is the bootstrap state only; RLU terminal: last row is terminal;
#   Minari-style: T transitions then an observation-only row, terminal or truncated.
EPISODES = [
    dict(kind="rlu", length=7, terminal=False),
    dict(kind="rlu", length=2, terminal=True),
    dict(kind="minari", length=5, terminal=True),
    dict(kind="rlu", length=1, terminal=True),
    dict(kind="minari", length=3, terminal=False),
    dict(kind="rlu", length=9, terminal=True),
]


def make_episodes(rng):
    """Episodes as Python lists of rows: obs (distinct non-zero frames), action, reward, term."""
    episodes, value = [], 1
    for spec in EPISODES:
        rows = spec["length"] + (spec["kind"] == "minari")
        frames = [np.full((84, 84), value + i, np.uint8) for i in range(rows)]
        value += rows
        terms = [False] * rows
        if spec["terminal"]:
            terms[spec["length"] - 1] = True
        episodes.append(
            dict(
                obs=frames,
                action=[int(a) for a in rng.integers(0, 6, rows)],
                reward=[float(r) for r in rng.normal(size=rows).astype(np.float32)],
                term=terms,
            )
        )
    return episodes


def store_from_arrays(episodes):
    starts = np.cumsum([0] + [len(e["obs"]) for e in episodes[:-1]])
    return EpisodeStore.from_arrays(
        np.stack([f for e in episodes for f in e["obs"]]),
        np.array([a for e in episodes for a in e["action"]], np.int32),
        np.array([r for e in episodes for r in e["reward"]], np.float32),
        np.array([t for e in episodes for t in e["term"]]),
        starts,
    )


def store_from_adds(episodes, specs):
    """The same data through the online API (tiny capacity, so the arrays must grow)."""
    store = EpisodeStore((84, 84), capacity=2)
    for episode, spec in zip(episodes, specs, strict=True):
        if spec["kind"] == "minari":
            steps = spec["length"]
            store.add_episode(
                np.stack(episode["obs"]),
                np.array(episode["action"][:steps]),
                np.array(episode["reward"][:steps]),
                np.array(episode["term"][:steps]),
            )
            continue
        rows = len(episode["obs"])
        last = rows - 1 if spec["terminal"] else rows - 2  # truncated: last row is next_obs
        for i in range(last + 1):
            store.add(
                episode["obs"][i],
                episode["action"][i],
                episode["reward"][i],
                terminal=episode["term"][i],
                truncated=(i == last and not spec["terminal"]),
                next_obs=episode["obs"][i + 1] if i + 1 < rows else None,
            )
    return store


def reference(episodes, n, stack):
    """Every transition by brute force: {global row: (obs, action, reward, discount, next_obs)}."""
    out, offset = {}, 0

    def starts_transition(e, j):
        return j + 1 < len(e["obs"]) or e["term"][j]

    def stacked(e, j):
        zero = np.zeros((84, 84), np.uint8)
        return np.stack([e["obs"][i] if i >= 0 else zero for i in range(j - stack + 1, j + 1)], -1)

    for e in episodes:
        length = len(e["obs"])
        for i in range(length):
            if not starts_transition(e, i):
                continue
            ret, k, j = 0.0, 0, i
            while True:
                ret += GAMMA**k * e["reward"][j]
                k += 1
                if e["term"][j]:
                    discount, nxt = 0.0, min(j + 1, length - 1)
                    break
                if k == n or not starts_transition(e, j + 1):
                    discount, nxt = GAMMA**k, j + 1
                    break
                j += 1
            out[offset + i] = (stacked(e, i), e["action"][i], ret, discount, stacked(e, nxt))
        offset += length
    return out


@pytest.fixture
def episodes():
    return make_episodes(np.random.default_rng(0))


@pytest.mark.parametrize("n", [1, 3, 20])
@pytest.mark.parametrize("stack", [1, 4])
def test_batch_matches_reference(episodes, n, stack):
    expected = reference(episodes, n, stack)
    store = store_from_arrays(episodes)
    assert store.num_transitions == len(expected)
    rows = np.array(sorted(expected))
    batch = Replay(store, stack=stack, n_step=n, gamma=GAMMA).batch_at(rows)
    assert batch.obs.shape == (len(rows), 84, 84, stack) and batch.obs.dtype == np.uint8
    assert batch.action.dtype == np.int32 and batch.weight.dtype == np.float32
    for b, row in enumerate(rows):
        obs, action, reward, discount, next_obs = expected[row]
        np.testing.assert_array_equal(batch.obs[b], obs)
        np.testing.assert_array_equal(batch.next_obs[b], next_obs)
        assert batch.action[b] == action
        assert batch.reward[b] == pytest.approx(reward, rel=1e-5, abs=1e-6)
        assert batch.discount[b] == pytest.approx(discount, rel=1e-6)


def test_truncated_bootstraps_and_terminal_does_not(episodes):
    """Episode 0 (RLU, truncated after 7 rows) and episode 1 (RLU, terminal) at their ends."""
    replay = Replay(store_from_arrays(episodes), stack=4, n_step=3, gamma=GAMMA)
    batch = replay.batch_at(np.array([5, 4, 8]))
    # row 5 -> one step to row 6 (the truncated end); row 4 -> two steps; row 8 is terminal.
    np.testing.assert_allclose(batch.discount, [GAMMA, GAMMA**2, 0.0], rtol=1e-6)
    assert batch.next_obs[0, 0, 0, -1] == episodes[0]["obs"][6][0, 0]


def test_online_adds_equal_from_arrays(episodes):
    online = store_from_adds(episodes, EPISODES)
    offline = store_from_arrays(episodes)
    np.testing.assert_array_equal(online.episode_starts, offline.episode_starts)
    np.testing.assert_array_equal(online.terminals, offline.terminals)
    np.testing.assert_array_equal(online.obs, offline.obs)
    rows = np.flatnonzero(
        offline.starts_transition(np.arange(offline.num_rows), offline.locate(np.arange(offline.num_rows))[1])
    )
    a = Replay(online, n_step=3, gamma=GAMMA).batch_at(rows)
    b = Replay(offline, n_step=3, gamma=GAMMA).batch_at(rows)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def test_open_episode_last_row_is_not_sampled():
    store = EpisodeStore((3,), np.float32)
    store.add(np.ones(3), 0, 1.0, terminal=False)
    assert store.num_transitions == 0
    with pytest.raises(ValueError):
        Replay(store).sample(4, 0)
    store.add(np.ones(3) * 2, 1, 1.0, terminal=False)
    rows, _ = Replay(store).sample_rows(64, 0)
    assert set(rows.tolist()) == {0}


def test_uniform_sampling_is_deterministic_and_covers_only_transitions(episodes):
    store = store_from_arrays(episodes)
    replay = Replay(store, n_step=2, gamma=GAMMA)
    a, b = replay.sample(32, np.random.default_rng(7)), replay.sample(32, np.random.default_rng(7))
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    valid = set(reference(episodes, 1, 1))
    rows, _ = replay.sample_rows(40_000, 1)
    counts = np.bincount(rows, minlength=store.num_rows)
    assert set(np.flatnonzero(counts).tolist()) == valid
    # uniform over the valid rows: max abs deviation of frequencies <= 0.006 (~5 sigma at 40k)
    freq = counts[sorted(valid)] / len(rows)
    assert np.abs(freq - 1 / len(valid)).max() < 0.006


def test_vector_observations_are_float_and_unstacked():
    store = EpisodeStore((3,), np.float32, (2,), np.float32)
    obs = np.arange(12, dtype=np.float32).reshape(4, 3)
    store.add_episode(obs, np.ones((3, 2)), np.array([1.0, 2.0, 3.0]), np.array([False, False, True]))
    batch = Replay(store, stack=4, n_step=2, gamma=GAMMA).batch_at(np.array([0, 2]))
    assert batch.obs.shape == (2, 3) and batch.obs.dtype == np.float32
    assert batch.action.shape == (2, 2) and batch.action.dtype == np.float32
    np.testing.assert_array_equal(batch.next_obs, obs[[2, 3]])
    np.testing.assert_allclose(batch.reward, [1 + GAMMA * 2, 3])
    np.testing.assert_allclose(batch.discount, [GAMMA**2, 0])


def test_segmented_rows_gather_like_one_array():
    whole = np.random.default_rng(0).integers(0, 255, (30, 4, 4), dtype=np.uint8)
    segmented = SegmentedRows([whole[:7], whole[7:8], whole[8:]])
    rows = np.array([[29, 0, 7], [8, 6, 6]])
    np.testing.assert_array_equal(segmented[rows], whole[rows])
    assert len(segmented) == 30


def test_prioritized_frequencies_match_priorities(episodes):
    store = store_from_arrays(episodes)
    replay = Replay(store, n_step=1, prioritized=True, alpha=0.7, beta=0.5)
    valid = np.array(sorted(reference(episodes, 1, 1)))
    td = np.random.default_rng(3).uniform(0.0, 3.0, len(valid))
    replay.update_priorities(valid, td)
    priority = (np.abs(td) + replay.priority_eps) ** 0.7
    expected = priority / priority.sum()
    rng = np.random.default_rng(11)
    counts = np.zeros(store.num_rows)
    draws = 0
    for _ in range(100):
        rows, weights = replay.sample_rows(1000, rng)
        counts += np.bincount(rows, minlength=store.num_rows)
        draws += len(rows)
        # weights (N P)^-beta normalised by the batch maximum
        p = priority[np.searchsorted(valid, rows)] / priority.sum()
        w = (len(valid) * p) ** -0.5
        np.testing.assert_allclose(weights, w / w.max(), rtol=1e-5)
    # tolerance: max abs deviation of empirical frequencies <= 0.003 over 100k draws (> 5 sigma)
    assert np.abs(counts[valid] / draws - expected).max() < 0.003
    assert counts.sum() == counts[valid].sum()  # never a row that starts no transition


def test_new_rows_get_max_priority():
    store = EpisodeStore((2,), np.float32)
    replay = Replay(store, prioritized=True)
    for i in range(4):
        store.add(np.full(2, i), 0, 0.0, terminal=False)
    rows, _ = replay.sample_rows(8, 0)
    replay.update_priorities(np.array([0]), np.array([5.0]))  # row 0 now has the max priority
    store.add(np.zeros(2), 0, 0.0, terminal=True)  # rows 3 and 4 become transitions
    replay.sample_rows(1, 0)
    leaves = replay._tree.get(np.arange(5))
    assert leaves[3] == leaves[4] == leaves[0] > leaves[1]


def test_sum_tree_invariants_and_search():
    rng = np.random.default_rng(0)
    tree = SumTree(37)
    for _ in range(20):
        idx = rng.integers(0, 37, 5)
        tree.update(idx, rng.uniform(0, 2, 5) * (rng.random(5) > 0.3))
        inner = np.arange(1, tree.size)
        np.testing.assert_allclose(tree.tree[inner], tree.tree[2 * inner] + tree.tree[2 * inner + 1])
    leaves = tree.get(np.arange(tree.size))
    assert tree.total == pytest.approx(leaves.sum())
    cumulative = np.cumsum(leaves)
    values = rng.uniform(0, tree.total, 1000)
    np.testing.assert_array_equal(tree.find(values), np.searchsorted(cumulative, values, side="right"))
    assert np.all(leaves[tree.find(np.linspace(0, tree.total, 200, endpoint=False))] > 0)
    tree.update(np.arange(37), np.ones(37))  # bulk path (full rebuild)
    tree.grow(100)
    assert tree.total == pytest.approx(37) and tree.size == 128
    with pytest.raises(ValueError):
        tree.update(np.array([0]), np.array([-1.0]))


def test_first_fraction_cuts_at_transition_granularity():
    starts = np.array([0, 10])  # two terminal episodes of 10 rows
    mid = first_fraction(0.45, starts, 20)
    assert mid.num_rows == 10 and mid.last_row_obs_only  # rows 0-8 + row 9 as bootstrap state
    np.testing.assert_array_equal(mid.episode_starts, [0])
    boundary = first_fraction(0.5, starts, 20)
    assert boundary.num_rows == 10 and not boundary.last_row_obs_only
    assert first_fraction(1.0, starts, 20).num_rows == 20
    with pytest.raises(ValueError):
        first_fraction(0.0, starts, 20)
    # the cut episode's last kept transition bootstraps (truncated), exactly K transitions remain
    terminals = np.zeros(20, bool)
    terminals[[9, 19]] = True
    terms = terminals[: mid.num_rows].copy()
    terms[-1] = False
    frames = np.arange(1, 21, dtype=np.uint8)[:, None, None] * np.ones((1, 84, 84), np.uint8)
    store = EpisodeStore.from_arrays(frames[:10], np.zeros(10, np.int32), np.ones(10), terms, mid.episode_starts)
    assert store.num_transitions == 9
    batch = Replay(store, n_step=3, gamma=GAMMA).batch_at(np.array([8]))
    assert batch.discount[0] == pytest.approx(GAMMA) and batch.next_obs[0, 0, 0, -1] == 10


@pytest.mark.parametrize("prioritized", [False, True])
def test_sample_chunk_equals_successive_samples(episodes, prioritized):
    """One gather for a chunk of updates gives exactly the batches that step-by-step sampling on
    the same generator gives (uniform: one draw of n*b rows consumes the stream as n draws of b),
    so the learner's results do not depend on how many updates run per compiled call."""
    store = store_from_arrays(episodes)
    replay = Replay(store, n_step=2, gamma=GAMMA, prioritized=prioritized)
    chunk = replay.sample_chunk(8, 5, np.random.default_rng(3))
    rng = np.random.default_rng(3)
    steps = [replay.sample(8, rng) for _ in range(5)]
    for field, per_step in zip(chunk, zip(*steps, strict=True), strict=True):
        assert field.shape[:2] == (5, 8)
        np.testing.assert_array_equal(field, np.stack(per_step))
