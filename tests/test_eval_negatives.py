"""DyGLib's evaluation negatives (random / historical / inductive) and TGB's ranking metrics."""
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

from tbdfs_dgl.eval_negatives import EvalNegativeSampler, NegativeEdges
from tbdfs_dgl.metrics import hits_at_k, mrr, ranking_metrics, ranks


# ---------------------------------------------------------------------------- metrics
def test_ranks_average_ties_as_tgb():
    pos = np.array([5.0, 1.0, 2.0, 3.0])
    neg = np.array([[1.0, 2.0, 3.0],     # all below: rank 1
                    [2.0, 3.0, 4.0],     # all above: rank 4
                    [2.0, 0.0, 0.0],     # one tie: optimistic 0, pessimistic 1 -> 1.5
                    [3.0, 3.0, 9.0]])    # one above, two ties: (1 + 3) / 2 + 1 = 3
    np.testing.assert_array_equal(ranks(pos, neg), [1.0, 4.0, 1.5, 3.0])
    assert mrr(pos, neg) == pytest.approx((1 + 1 / 4 + 1 / 1.5 + 1 / 3) / 4)
    assert hits_at_k(pos, neg, 1) == 0.25  # the tied 1.5 is not a hit at 1
    assert hits_at_k(pos, neg, 3) == 0.75
    assert hits_at_k(pos, neg, 10) == 1.0


def test_ranking_metrics_dict_and_k1_vector():
    out = ranking_metrics([2.0, 0.0], [1.0, 1.0])  # K = 1 given as a vector
    assert out == {"count": 2.0, "candidates": 1.0, "mrr": 0.75, "hits@1": 0.5,
                   "hits@3": 1.0, "hits@10": 1.0}
    empty = ranking_metrics(np.zeros(0), np.zeros((0, 5)))
    assert empty["count"] == 0 and empty["candidates"] == 5 and np.isnan(empty["mrr"])
    assert np.isnan(mrr(np.zeros(0), np.zeros((0, 2))))


def test_ranking_metrics_reject_bad_input():
    with pytest.raises(ValueError, match="shape"):
        ranks([1.0, 2.0], np.zeros((3, 4)))
    with pytest.raises(ValueError, match="NaN"):
        mrr([np.nan], [[0.0]])
    with pytest.raises(ValueError, match="k must"):
        hits_at_k([1.0], [[0.0]], 0)
    with pytest.raises(ValueError, match="K = 0"):
        mrr([1.0], np.zeros((1, 0)))


# ---------------------------------------------------------------------------- negatives
def make_data(seed, n=400, users=12, items=9):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, users, n)
    dst = users + rng.integers(0, items, n)
    ts = np.sort(rng.integers(0, 200, n)).astype(np.float64)  # ties included
    return SimpleNamespace(name="toy", src=src, dst=dst, ts=ts, num_nodes=users + items)


def dyglib_pool(data, pool_rows, strategy, t0, t1, last_observed):
    """DyGLib's sets, transcribed from ``NegativeEdgeSampler.{historical,inductive}_sample``."""
    src, dst, ts = data.src[pool_rows], data.dst[pool_rows], data.ts[pool_rows]

    def edges(a, b):
        sel = (ts >= a) & (ts <= b)
        return set(zip(src[sel].tolist(), dst[sel].tolist()))

    earliest = ts.min()
    pool = edges(earliest, t0) - edges(t0, t1)
    if strategy == "inductive":
        pool -= edges(earliest, last_observed)
    return pool


@pytest.mark.parametrize("strategy", ["historical", "inductive"])
@pytest.mark.parametrize("k", [1, 4])
def test_whole_edge_negatives_follow_dyglib(strategy, k):
    data = make_data(1)
    pool_rows = np.arange(len(data.ts))
    last = 100.0
    sampler = EvalNegativeSampler(data, strategy, last_observed_time=last, num_candidates=k,
                                  seed=3)
    possible = {(s, d) for s in np.unique(data.src).tolist() for d in np.unique(data.dst).tolist()}
    filled = drawn_from_pool = 0
    for lo, size in [(150, 10), (160, 25), (200, 120), (320, 80), (390, 10), (396, 2)]:
        rows = np.arange(lo, min(lo + size, len(data.ts)))
        neg = sampler.sample(rows)
        assert neg.src.shape == neg.dst.shape == (len(rows), k)
        assert neg.src.dtype == neg.dst.dtype == np.int64
        t0, t1 = data.ts[rows[0]], data.ts[rows[-1]]
        expect = dyglib_pool(data, pool_rows, strategy, t0, t1, last)
        got = list(zip(neg.src.ravel().tolist(), neg.dst.ravel().tolist()))
        key = sampler.candidate_edges(t0, t1)
        assert set(zip((key // data.num_nodes).tolist(), (key % data.num_nodes).tolist())) \
            == expect
        if len(got) <= len(expect):
            assert len(set(got)) == len(got) and set(got) <= expect  # without replacement
            drawn_from_pool += 1
        else:  # the whole pool, then random edges that are not edges of the batch
            assert expect <= set(got)
            batch = set(zip(data.src[rows].tolist(), data.dst[rows].tolist()))
            rest = Counter(got) - Counter(expect)  # the fill may repeat pool edges
            assert sum(rest.values()) == len(got) - len(expect)
            assert all(e in possible and e not in batch for e in rest)
            filled += 1
    assert filled and drawn_from_pool  # both of DyGLib's branches were taken


def test_random_negatives_are_dyglibs_and_k1_is_todays_setting():
    data = make_data(2)
    sampler = EvalNegativeSampler(data, "random", num_candidates=3, seed=0)
    rows = np.arange(100, 140)
    neg = sampler.sample(rows)
    np.testing.assert_array_equal(neg.src, np.repeat(data.src[rows][:, None], 3, axis=1))
    assert set(neg.dst.ravel().tolist()) <= set(np.unique(data.dst).tolist())
    # Uniform over the distinct destinations: every one shows up over many draws.
    many = np.concatenate([sampler.sample(rows, stream=s).dst.ravel() for s in range(60)])
    assert set(many.tolist()) == set(np.unique(data.dst).tolist())
    one = EvalNegativeSampler(data, "random", seed=0).sample(rows)
    assert one.num_candidates == 1 and one.dst.shape == (40, 1)


@pytest.mark.parametrize("strategy", ["random", "historical", "inductive"])
def test_deterministic_per_batch_whatever_came_before(strategy):
    data = make_data(4)
    make = lambda: EvalNegativeSampler(data, strategy, last_observed_time=90.0,  # noqa: E731
                                       num_candidates=2, seed=7)
    a, b = make(), make()
    rows1, rows2 = np.arange(200, 230), np.arange(230, 260)
    first = a.sample(rows1), a.sample(rows2)
    second = b.sample(rows2), b.sample(rows1)  # other order, fresh sampler
    for x, y in [(first[0], second[1]), (first[1], second[0])]:
        np.testing.assert_array_equal(x.src, y.src)
        np.testing.assert_array_equal(x.dst, y.dst)
    other = EvalNegativeSampler(data, strategy, last_observed_time=90.0, num_candidates=2,
                                seed=8).sample(rows1)
    assert not np.array_equal(other.dst, first[0].dst)


@pytest.mark.parametrize("strategy", ["historical", "inductive"])
def test_same_source_candidates(strategy):
    data = make_data(5, n=600)
    last = 80.0
    sampler = EvalNegativeSampler(data, strategy, last_observed_time=last, num_candidates=3,
                                  same_source=True, seed=1)
    all_rows = np.arange(len(data.ts))
    for lo in range(300, 600, 50):
        rows = np.arange(lo, lo + 50)
        neg = sampler.sample(rows)
        np.testing.assert_array_equal(neg.src, np.repeat(data.src[rows][:, None], 3, axis=1))
        t0, t1 = data.ts[rows[0]], data.ts[rows[-1]]
        pool = dyglib_pool(data, all_rows, strategy, t0, t1, last)
        for i, s in enumerate(data.src[rows].tolist()):
            own = {d for (u, d) in pool if u == s}
            got = neg.dst[i].tolist()
            if len(own) >= 3:
                assert len(set(got)) == 3 and set(got) <= own
            else:
                assert own <= set(got)
                now = set(data.dst[rows][data.src[rows] == s].tolist())
                assert all(d not in now for d in got if d not in own)


def test_new_node_rows_and_for_split():
    data = make_data(6)
    split = SimpleNamespace(val_time=120.0, test_time=160.0,
                            val_inductive=(data.ts > 120) & (data.ts <= 160) & (data.src < 4),
                            test_inductive=(data.ts > 160) & (data.src < 4))
    s = EvalNegativeSampler.for_split(data, split, "test", "inductive", new_nodes=True,
                                      num_candidates=2)
    assert s.last_observed_time == 160.0
    rows = np.flatnonzero(split.test_inductive)
    assert set(s.unique_dst.tolist()) == set(data.dst[rows].tolist())
    neg = s.sample(rows[:10])
    pool = dyglib_pool(data, rows, "inductive", data.ts[rows[0]], data.ts[rows[9]], 160.0)
    picked = set(zip(neg.src.ravel().tolist(), neg.dst.ravel().tolist()))
    assert pool <= picked or picked <= pool
    val = EvalNegativeSampler.for_split(data, split, "val", "historical")
    assert val.last_observed_time == 120.0 and val.seed != s.seed


def test_bad_arguments_are_named():
    data = make_data(7)
    with pytest.raises(ValueError, match="strategy"):
        EvalNegativeSampler(data, "hard")
    with pytest.raises(ValueError, match="last_observed_time"):
        EvalNegativeSampler(data, "inductive")
    with pytest.raises(ValueError, match="num_candidates"):
        EvalNegativeSampler(data, num_candidates=0)
    with pytest.raises(ValueError, match="no interactions"):
        EvalNegativeSampler(data, rows=np.zeros(len(data.ts), bool))
    with pytest.raises(IndexError, match="rows"):
        EvalNegativeSampler(data).sample([len(data.ts)])
    empty = EvalNegativeSampler(data, num_candidates=4).sample([])
    assert isinstance(empty, NegativeEdges) and empty.dst.shape == (0, 4)
