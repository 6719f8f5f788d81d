"""The sampling strategy as one type: ``tbdfs_dgl.Strategy`` (the C++ enum), its names in
``TemporalSampler``, and each strategy's chooser against tests/reference.py."""
import numpy as np
import pytest

import tbdfs_dgl
from tbdfs_dgl import Strategy, TemporalGraph, TemporalSampler, _C
from tbdfs_dgl._strategy import STRATEGIES, strategy_parts, to_strategy

import reference as ref

NAMES = {Strategy.RECENT: ("recent", False), Strategy.UNIFORM: ("uniform", False),
         Strategy.UNIFORM_REPLACE: ("uniform", True)}


def hops_as_lists(hops):
    return [{"num_dst": h[0], "src_nodes": h[1].tolist(), "src_ts": h[2].tolist(),
             "indptr": h[3].tolist(), "eids": h[4].tolist(), "dt": h[5].tolist()} for h in hops]


def test_strategy_is_the_extensions_enum():
    assert tbdfs_dgl.Strategy is _C.Strategy
    assert list(Strategy.__members__) == ["RECENT", "UNIFORM", "UNIFORM_REPLACE"]
    # the reference has one chooser per member, under its lower-case name
    assert set(ref.CHOOSERS) == {name.lower() for name in Strategy.__members__}


@pytest.mark.parametrize("strategy", list(NAMES))
def test_names_and_strategies_round_trip(strategy):
    name, replace = NAMES[strategy]
    assert strategy_parts(strategy) == (name, replace)
    assert to_strategy(name, replace) == strategy
    assert to_strategy(*strategy_parts(strategy)) == strategy
    g = TemporalGraph([0, 1], [1, 2], [1.0, 2.0])
    sampler = TemporalSampler(g, [2], strategy=strategy)
    assert (sampler.strategy, sampler.replace) == (name, replace)
    assert f"strategy={name!r}, replace={replace}" in repr(sampler)


def test_uniform_member_with_replace_is_uniform_replace():
    assert strategy_parts(Strategy.UNIFORM, replace=True) == ("uniform", True)
    assert strategy_parts(Strategy.UNIFORM_REPLACE, replace=True) == ("uniform", True)
    assert strategy_parts("uniform", replace=True) == ("uniform", True)
    for name in STRATEGIES:
        assert strategy_parts(name) == (name, False)


def test_bad_strategies_raise_clear_errors():
    g = TemporalGraph([0, 1], [1, 2], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"strategy must be one of \('recent', 'uniform'\), "
                                         r"got 'latest'"):
        TemporalSampler(g, [2], strategy="latest")
    with pytest.raises(ValueError, match="strategy must be one of"):
        TemporalSampler(g, [2], strategy="RECENT")  # a member's name is not a strategy name
    with pytest.raises(ValueError, match="replace=True applies to strategy='uniform' only"):
        TemporalSampler(g, [2], strategy=Strategy.RECENT, replace=True)
    with pytest.raises(ValueError, match="member of tbdfs_dgl.Strategy"):
        TemporalSampler(g, [2], strategy=Strategy(7))  # pybind11 casts any int
    with pytest.raises(ValueError, match="replace=True applies"):
        to_strategy("recent", True)
    with pytest.raises(ValueError, match="strategy must be one of"):
        to_strategy("latest")
    # The extension takes only a Strategy, and checks its value once, before sampling.
    nodes, times = np.zeros(1, np.int64), np.full(1, 5.0)
    with pytest.raises(TypeError):
        _C.sample(g.csr, nodes, times, [2], "recent", True, 0, 0, 1, False)
    with pytest.raises(TypeError):
        _C.sample(g.csr, nodes, times, [2], 1, True, 0, 0, 1, False)
    with pytest.raises(ValueError, match="strategy 7 is not a Strategy"):
        _C.sample(g.csr, nodes, times, [2], Strategy(7), True, 0, 0, 1, False)


@pytest.mark.parametrize("strategy", list(NAMES))
def test_a_member_samples_what_its_name_samples(strategy, _seed_everything):
    rng = np.random.default_rng(_seed_everything)
    src, dst, ts = ref.random_graph(rng, 20, 150)
    g = TemporalGraph(src, dst, ts, num_nodes=20)
    nodes, times = rng.integers(0, 20, 40), rng.choice(ts + 0.5, 40)
    name, replace = NAMES[strategy]
    by_member = TemporalSampler(g, [3, 4], strategy=strategy, seed=7, num_threads=1)
    by_name = TemporalSampler(g, [3, 4], strategy=name, replace=replace, seed=7, num_threads=1)
    a_hops, a_paths = by_member.sample_arrays(nodes, times, batch_id=5)
    b_hops, b_paths = by_name.sample_arrays(nodes, times, batch_id=5)
    assert hops_as_lists(a_hops) == hops_as_lists(b_hops)
    for x, y in zip(a_paths, b_paths):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("strategy", list(NAMES))
@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("directed", [False, True])
def test_each_chooser_matches_the_reference(strategy, strict, directed, _seed_everything):
    """The extension called with each member draws exactly the reference chooser's picks,
    on random graphs with time ties and fanouts on both sides of Floyd's scan threshold."""
    seed = _seed_everything
    rng = np.random.default_rng(seed)
    n, e = 12, 400
    src, dst, ts = ref.random_graph(rng, n, e, num_times=60)
    g = TemporalGraph(src, dst, ts, num_nodes=n, directed=directed)
    adj = ref.adjacency(src, dst, ts, n, directed)
    nodes = rng.integers(0, n, 30)
    times = rng.choice(np.concatenate([ts, ts + 0.5, [ts.min() - 1, ts.max() + 1]]), 30)
    for fanouts in ([70], [3, 65], [2, 1, 5]):
        stream = int(rng.integers(0, 1000))
        hops, _, _ = _C.sample(g.csr, nodes, times, fanouts, strategy, strict, seed, stream,
                               int(rng.integers(1, 4)), False)
        want = ref.sample_tree(adj, nodes, times, fanouts, strict=strict,
                               choose_at=ref.chooser(strategy.name.lower(), seed, stream))
        assert hops_as_lists(hops) == want, (fanouts, stream)
