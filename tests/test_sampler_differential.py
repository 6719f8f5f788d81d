"""Randomized differential test: the C++ sampler against tests/reference.py.

Random graphs with time ties, isolated nodes, self-loops and repeated pairs, directed and
undirected, every strategy (recent, uniform, uniform with replacement) and time rule.  The
recent strategy must match the reference exactly.  Uniform draws are compared on what a
random strategy promises (eligibility, counts, time rule, no duplicates without
replacement, the tree's bookkeeping), and exactly against the reference's re-implementation
of the sampler's random streams.

A few seconds by default; ``pytest --slow`` runs many more cases.  Every case prints its
seed: ``TBDFS_TEST_SEED`` shifts them all (see conftest.py).
"""
from collections import Counter

import numpy as np
import pytest

from tbdfs_dgl import TemporalGraph, TemporalSampler

import reference as ref

STRATEGIES = [("recent", False), ("uniform", False), ("uniform", True)]


def hops_as_lists(hops):
    return [{"num_dst": h[0], "src_nodes": h[1].tolist(), "src_ts": h[2].tolist(),
             "indptr": h[3].tolist(), "eids": h[4].tolist(), "dt": h[5].tolist()} for h in hops]


def random_case(rng: np.random.Generator):
    """A random graph, roots and sampler settings."""
    n = int(rng.integers(2, 25))
    e = int(rng.integers(1, 120))
    src, dst, ts = ref.random_graph(rng, n, e, num_times=int(rng.integers(1, max(2, e // 2) + 1)))
    if rng.random() < 0.3:
        ts = ts + rng.random(e).round(1)  # non-integer times, still with ties
    directed = bool(rng.random() < 0.5)
    strict = bool(rng.random() < 0.5)
    num_layers = int(rng.integers(1, 4))
    fanouts = [int(k) for k in rng.integers(1, 6, num_layers)]
    b = int(rng.integers(0, 15))
    nodes = rng.integers(0, n, b)
    times = rng.choice(np.concatenate([ts, ts + 0.5, [ts.min() - 1, ts.max() + 1]]), b)
    return src, dst, ts, n, directed, strict, fanouts, nodes, times


def check_uniform_promises(hops, adj, fanouts, strict, replace):
    """What any random strategy must satisfy, hop by hop."""
    L = len(fanouts)
    dst = None
    for h, hop in enumerate(hops):
        num_dst, src_nodes, src_ts, indptr, eids, dt = hop
        if dst is not None:
            assert num_dst == len(dst)
            assert list(zip(src_nodes[:num_dst].tolist(), src_ts[:num_dst].tolist())) == dst
        k = fanouts[L - 1 - h]
        for d in range(num_dst):
            u, t = int(src_nodes[d]), float(src_ts[d])
            cands = ref.eligible(adj, u, t, strict)
            first, last = int(indptr[d]), int(indptr[d + 1])
            want = (k if cands else 0) if replace else min(k, len(cands))
            assert last - first == want, (h, d, u, t)
            by_row = {r: (te, v) for te, r, v in cands}
            picked = eids[first:last].tolist()
            if not replace:
                assert len(set(picked)) == len(picked), "duplicate without replacement"
            for i, r in enumerate(picked):
                assert r in by_row, f"edge {r} not eligible for ({u}, {t})"
                te, v = by_row[r]
                s = num_dst + first + i
                assert src_nodes[s] == v and src_ts[s] == te
                assert dt[first + i] == t - te
                assert (te < t) if strict else (te <= t)
        dst = list(zip(src_nodes.tolist(), src_ts.tolist()))


def run_case(seed: int) -> None:
    rng = np.random.default_rng(seed)
    src, dst, ts, n, directed, strict, fanouts, nodes, times = random_case(rng)
    g = TemporalGraph(src, dst, ts, num_nodes=n, directed=directed)
    adj = ref.adjacency(src, dst, ts, n, directed)
    rule = "strict" if strict else "inclusive"
    for strategy, replace in STRATEGIES:
        threads = int(rng.integers(1, 4))
        sampler = TemporalSampler(g, fanouts, strategy=strategy, replace=replace,
                                  time_rule=rule, seed=seed, num_threads=threads)
        batch_id = int(rng.integers(0, 1000))
        hops, paths = sampler.sample_arrays(nodes, times, batch_id=batch_id)
        label = (f"seed={seed} strategy={strategy} replace={replace} rule={rule} "
                 f"directed={directed} fanouts={fanouts}")
        if strategy == "recent":
            expected = ref.sample_tree(adj, nodes, times, fanouts, strict=strict)
        else:
            check_uniform_promises(hops, adj, fanouts, strict, replace)
            chooser = ref.uniform_chooser(seed, 2 * batch_id + 1, replace)
            expected = ref.sample_tree(adj, nodes, times, fanouts, strict=strict,
                                       choose_at=chooser)
        assert hops_as_lists(hops) == expected, label
        want = ref.explode_paths(expected, fanouts)
        for name, got in zip(["nodes", "eids", "ts", "mask", "src_index"], paths):
            np.testing.assert_array_equal(got, want[name], err_msg=f"{name}: {label}")
        # the thread count never changes the result
        other = TemporalSampler(g, fanouts, strategy=strategy, replace=replace, time_rule=rule,
                                seed=seed, num_threads=1 if threads > 1 else 3)
        again, _ = other.sample_arrays(nodes, times, batch_id=batch_id)
        assert hops_as_lists(again) == hops_as_lists(hops), label


def test_sampler_matches_reference_on_random_graphs(_seed_everything):
    base = _seed_everything
    print(f"differential cases: seeds {base}..{base + 199}")
    for i in range(200):
        run_case(base + i)


@pytest.mark.slow
def test_sampler_matches_reference_on_many_random_graphs(_seed_everything):
    base = _seed_everything
    print(f"differential cases: seeds {base}..{base + 4999}")
    for i in range(5000):
        run_case(base + i)


def test_uniform_with_replacement_covers_the_eligible_edges_evenly():
    """With replacement every eligible edge is equally likely on each draw (chi-square,
    fixed seed)."""
    n, k, roots = 8, 5, 4000
    g = TemporalGraph(np.zeros(n, np.int64), np.arange(1, n + 1), np.arange(n, dtype=float))
    sampler = TemporalSampler(g, [k], strategy="uniform", replace=True, seed=99, num_threads=1)
    hops, _ = sampler.sample_arrays(np.zeros(roots, np.int64), np.full(roots, 100.0),
                                    batch_id=0, paths=False)
    counts = Counter(hops[0][4].tolist())
    expected = roots * k / n
    chi2 = sum((counts[r] - expected) ** 2 / expected for r in range(n))
    assert chi2 < 40.5, chi2  # the 1e-6 upper quantile of chi2(7)
