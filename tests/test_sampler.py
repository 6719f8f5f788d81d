"""TemporalSampler against the pure-Python reference, plus its statistical and API promises."""
import pickle

import numpy as np
import pytest
import torch

from tbdfs_dgl import TemporalBatch, TemporalGraph, TemporalSampler

import reference as ref
from conftest import optional_dgl

dgl = optional_dgl()  # a stand-in in sanitizer mode: tests that use it are skipped


def hops_as_lists(hops):
    return [{"num_dst": h[0], "src_nodes": h[1].tolist(), "src_ts": h[2].tolist(),
             "indptr": h[3].tolist(), "eids": h[4].tolist(), "dt": h[5].tolist()} for h in hops]


def roots_for(rng, src, dst, ts, n):
    """Roots drawn like training: endpoints at interaction times, plus some earlier than all."""
    idx = rng.integers(0, len(src), n)
    nodes = np.where(rng.random(n) < 0.5, src[idx], dst[idx])
    times = ts[idx] + rng.choice([0.0, 0.5, 3.0], n)
    times[:2] = ts.min() - 1.0  # before any edge
    nodes[-1] = src.max() + 1   # an isolated node (random_graph leaves two)
    return nodes, times


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("time_rule", ["strict", "inclusive"])
@pytest.mark.parametrize("fanouts", [[3], [2, 3], [2, 1, 2]])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recent_matches_reference(directed, time_rule, fanouts, seed):
    rng = np.random.default_rng(seed)
    N = 14
    src, dst, ts = ref.random_graph(rng, N, 60)
    g = TemporalGraph(src, dst, ts, num_nodes=N, directed=directed)
    nodes, times = roots_for(rng, src, dst, ts, 12)
    sampler = TemporalSampler(g, fanouts, strategy="recent", time_rule=time_rule, num_threads=1)
    hops, paths = sampler.sample_arrays(nodes, times)

    adj = ref.adjacency(src, dst, ts, N, directed)
    expected = ref.sample_tree(adj, nodes, times, fanouts, strict=time_rule == "strict")
    assert hops_as_lists(hops) == expected
    want = ref.explode_paths(expected, fanouts)
    for name, got in zip(["nodes", "eids", "ts", "mask", "src_index"], paths):
        np.testing.assert_array_equal(got, want[name], err_msg=name)


def test_recent_breaks_time_ties_by_larger_edge_id():
    # Node 0 sees four edges at the same time; the two with the largest rows win.
    g = TemporalGraph([0, 0, 0, 0], [1, 2, 3, 4], [5.0, 5.0, 5.0, 5.0])
    hops, _ = TemporalSampler(g, [2], num_threads=1).sample_arrays([0], [6.0])
    assert hops[0][4].tolist() == [2, 3]
    assert hops[0][1][1:].tolist() == [3, 4]


def test_strict_rule_excludes_edges_at_the_query_time():
    g = TemporalGraph([0, 0, 0], [1, 2, 3], [1.0, 2.0, 3.0])
    strict = TemporalSampler(g, [5], time_rule="strict").sample_arrays([0], [2.0])[0][0]
    inclusive = TemporalSampler(g, [5], time_rule="inclusive").sample_arrays([0], [2.0])[0][0]
    assert strict[4].tolist() == [0]
    assert inclusive[4].tolist() == [0, 1]
    assert (strict[5] > 0).all() and (inclusive[5] >= 0).all()


def eligible_rows(adj, u, t):
    return sorted(r for _, r, _ in ref.eligible(adj, u, t, True))


@pytest.mark.parametrize("fanouts", [[4], [3, 4]])
def test_uniform_returns_distinct_eligible_edges(fanouts):
    rng = np.random.default_rng(5)
    N = 12
    src, dst, ts = ref.random_graph(rng, N, 80)
    g = TemporalGraph(src, dst, ts, num_nodes=N)
    adj = ref.adjacency(src, dst, ts, N, False)
    nodes, times = roots_for(rng, src, dst, ts, 30)
    hops, _ = TemporalSampler(g, fanouts, strategy="uniform", seed=3).sample_arrays(nodes, times)
    checked = 0
    for h, (num_dst, src_nodes, src_ts, indptr, eids, dt) in enumerate(hops):
        k = fanouts[len(fanouts) - 1 - h]
        for d in range(num_dst):
            got = eids[indptr[d]:indptr[d + 1]].tolist()
            allowed = eligible_rows(adj, int(src_nodes[d]), float(src_ts[d]))
            assert len(got) == len(set(got)), "duplicate edge without replacement"
            assert set(got) <= set(allowed), "ineligible edge"
            assert len(got) == min(k, len(allowed))
            checked += 1
        assert (dt > 0).all()
    assert checked >= 30


def test_uniform_with_replacement_draws_k_eligible_edges():
    rng = np.random.default_rng(6)
    N = 10
    src, dst, ts = ref.random_graph(rng, N, 50)
    g = TemporalGraph(src, dst, ts, num_nodes=N)
    adj = ref.adjacency(src, dst, ts, N, False)
    nodes, times = roots_for(rng, src, dst, ts, 40)
    hops, _ = TemporalSampler(g, [5], strategy="uniform", replace=True,
                              seed=1).sample_arrays(nodes, times)
    num_dst, src_nodes, src_ts, indptr, eids, _ = hops[0]
    repeats = 0
    for d in range(num_dst):
        got = eids[indptr[d]:indptr[d + 1]].tolist()
        allowed = eligible_rows(adj, int(nodes[d]), float(times[d]))
        assert len(got) == (5 if allowed else 0)
        assert set(got) <= set(allowed)
        repeats += len(got) - len(set(got))
    assert repeats > 0  # with replacement, small neighbourhoods repeat


def test_uniform_frequencies_match_k_over_eligible():
    # Node 0 has 20 eligible edges; each must be drawn with probability k / 20 = 0.25.
    n_edges, k, trials = 20, 5, 4000
    g = TemporalGraph(np.zeros(n_edges, np.int64), np.arange(1, n_edges + 1), np.arange(n_edges) + 1.0)
    sampler = TemporalSampler(g, [k], strategy="uniform", seed=11)
    hops, _ = sampler.sample_arrays(np.zeros(trials, np.int64), np.full(trials, 100.0))
    counts = np.bincount(hops[0][4], minlength=n_edges)
    expected = trials * k / n_edges
    # Each count is Binomial(trials, 0.25): sd ~ 27; 5 sd is a fixed, seeded bound.
    assert np.abs(counts - expected).max() < 5 * np.sqrt(trials * 0.25 * 0.75)
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 45  # 19 degrees of freedom: p < 0.001 above this


@pytest.mark.parametrize("strategy", ["recent", "uniform"])
def test_paths_agree_with_blocks_and_edges(strategy):
    rng = np.random.default_rng(7)
    N = 16
    src, dst, ts = ref.random_graph(rng, N, 120)
    g = TemporalGraph(src, dst, ts, num_nodes=N)
    nodes, times = roots_for(rng, src, dst, ts, 25)
    fanouts = [3, 2]
    batch = TemporalSampler(g, fanouts, strategy=strategy, seed=2).sample(nodes, times)
    p = batch.paths
    assert p.nodes.shape == (25, 6, 2)
    # The C++ explosion equals the reference explosion of the same tree.
    hops = []
    for blk in reversed(batch.blocks):
        indptr = blk.adj_tensors("csc")[0]
        hops.append({"num_dst": blk.num_dst_nodes(), "src_nodes": blk.srcdata[dgl.NID].tolist(),
                     "src_ts": blk.srcdata["ts"].tolist(), "indptr": indptr.tolist(),
                     "eids": blk.edata[dgl.EID].tolist(), "dt": blk.edata["dt"].tolist()})
    want = ref.explode_paths(hops, fanouts)
    np.testing.assert_array_equal(p.nodes.numpy(), want["nodes"])
    np.testing.assert_array_equal(p.src_index.numpy(), want["src_index"])
    np.testing.assert_array_equal(p.mask.numpy(), want["mask"])

    outer = batch.blocks[0]
    n_paths = 0
    for b in range(25):
        for q in range(6):
            prev_node, prev_t = int(nodes[b]), float(times[b])
            for h in range(2):
                if not p.mask[b, q, h]:
                    assert p.nodes[b, q, h] == -1 and p.eids[b, q, h] == -1
                    assert not p.mask[b, q, h:].any(), "a path resumes after a gap"
                    break
                e, v, t = int(p.eids[b, q, h]), int(p.nodes[b, q, h]), float(p.ts[b, q, h])
                assert {int(src[e]), int(dst[e])} == {prev_node, v}, "hop is not a real edge"
                assert ts[e] == t
                assert t < prev_t, "times must strictly decrease along a path"
                s = int(p.src_index[b, q, h])
                assert outer.srcdata[dgl.NID][s] == v and outer.srcdata["ts"][s] == t
                prev_node, prev_t = v, t
            n_paths += bool(p.mask[b, q, 0])
    assert n_paths > 25


def test_each_chain_appears_once():
    # Root 0 has two neighbours; only the second has a history of its own.
    g = TemporalGraph([0, 0, 2, 2], [1, 2, 3, 4], [1.0, 5.0, 2.0, 3.0])
    p = TemporalSampler(g, [2, 2]).sample([0], [10.0]).paths
    rows = {tuple(r) for r in p.nodes[0].tolist()}
    assert rows == {(1, -1), (-1, -1), (2, 3), (2, 4)}
    assert p.mask[0].sum(dim=1).tolist() == [1, 0, 2, 2]


def test_blocks_follow_dgl_conventions():
    rng = np.random.default_rng(8)
    src, dst, ts = ref.random_graph(rng, 20, 100)
    g = TemporalGraph(src, dst, ts, num_nodes=20)
    nodes, times = roots_for(rng, src, dst, ts, 10)
    batch = TemporalSampler(g, [4, 3]).sample(nodes, times)
    assert isinstance(batch, TemporalBatch) and batch.num_layers == 2
    last, first = batch.blocks[-1], batch.blocks[0]
    assert last.num_dst_nodes() == 10
    assert torch.equal(last.dstdata[dgl.NID], torch.as_tensor(nodes))
    assert first.num_dst_nodes() == last.num_src_nodes()
    for blk in batch.blocks:
        n = blk.num_dst_nodes()
        assert torch.equal(blk.srcdata[dgl.NID][:n], blk.dstdata[dgl.NID])
        assert blk.srcdata["ts"].dtype == torch.float64
        assert blk.edata[dgl.EID].dtype == torch.int64
        u, v = blk.edges()
        # dt = destination time - edge time, and the edge time is the source instance's time.
        assert torch.equal(blk.edata["dt"], blk.dstdata["ts"][v] - blk.srcdata["ts"][u])
        assert (blk.edata["dt"] > 0).all()


def test_blocks_run_through_dgl_layers():
    rng = np.random.default_rng(9)
    src, dst, ts = ref.random_graph(rng, 30, 200)
    g = TemporalGraph(src, dst, ts, num_nodes=30)
    nodes, times = roots_for(rng, src, dst, ts, 8)
    batch = TemporalSampler(g, [3, 3]).sample(nodes, times)
    feat = torch.randn(30, 5)
    convs = [dgl.nn.GraphConv(5, 4, allow_zero_in_degree=True), dgl.nn.GraphConv(4, 3, allow_zero_in_degree=True)]
    h = feat[batch.blocks[0].srcdata[dgl.NID]]
    for conv, blk in zip(convs, batch.blocks):
        h = conv(blk, h)
    assert h.shape == (8, 3) and torch.isfinite(h).all()
    gat = dgl.nn.GATConv(5, 2, num_heads=2, allow_zero_in_degree=True)
    out = gat(batch.blocks[-1], feat[batch.blocks[-1].srcdata[dgl.NID]])
    assert out.shape == (8, 2, 2) and torch.isfinite(out).all()


@pytest.mark.parametrize("strategy", ["recent", "uniform"])
def test_same_seed_same_batch_whatever_the_thread_count(strategy):
    rng = np.random.default_rng(10)
    src, dst, ts = ref.random_graph(rng, 300, 5000)
    g = TemporalGraph(src, dst, ts, num_nodes=300)
    nodes, times = roots_for(rng, src, dst, ts, 3000)  # enough to use several threads

    def draw(threads, seed):
        sampler = TemporalSampler(g, [5, 5], strategy=strategy, seed=seed, num_threads=threads)
        return [sampler.sample_arrays(nodes, times) for _ in range(2)]

    one, four = draw(1, 42), draw(4, 42)
    for (h1, p1), (h4, p4) in zip(one, four):
        for a, b in zip(h1, h4):
            for x, y in zip(a[1:], b[1:]):
                np.testing.assert_array_equal(x, y)
        for x, y in zip(p1, p4):
            np.testing.assert_array_equal(x, y)
    if strategy == "uniform":
        # Successive calls continue the stream; other seeds give other draws.
        assert not np.array_equal(one[0][0][1][4], one[1][0][1][4])
        other = draw(1, 43)
        assert not np.array_equal(one[0][0][1][4], other[0][0][1][4])


def test_batch_id_fixes_the_stream():
    rng = np.random.default_rng(11)
    src, dst, ts = ref.random_graph(rng, 50, 800)
    g = TemporalGraph(src, dst, ts, num_nodes=50)
    nodes, times = roots_for(rng, src, dst, ts, 100)
    a = TemporalSampler(g, [6], strategy="uniform", seed=5)
    b = TemporalSampler(g, [6], strategy="uniform", seed=5)
    b.sample_arrays(nodes, times)  # advance b's own counter: must not matter
    x = a.sample_arrays(nodes, times, batch_id=7)[0][0][4]
    y = b.sample_arrays(nodes, times, batch_id=7)[0][0][4]
    z = b.sample_arrays(nodes, times, batch_id=8)[0][0][4]
    np.testing.assert_array_equal(x, y)
    assert not np.array_equal(x, z)


def test_default_seed_follows_torch_manual_seed():
    g = TemporalGraph(np.zeros(30, np.int64), np.arange(1, 31), np.arange(30.0))
    torch.manual_seed(123)
    a = TemporalSampler(g, [3], strategy="uniform").sample_arrays([0] * 50, [99.0] * 50)
    torch.manual_seed(123)
    b = TemporalSampler(g, [3], strategy="uniform").sample_arrays([0] * 50, [99.0] * 50)
    np.testing.assert_array_equal(a[0][0][4], b[0][0][4])


def test_empty_graph_and_no_history():
    g = TemporalGraph(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), num_nodes=5)
    batch = TemporalSampler(g, [3, 2]).sample([0, 4], [1.0, 2.0])
    assert [b.num_edges() for b in batch.blocks] == [0, 0]
    assert batch.blocks[-1].num_dst_nodes() == 2
    assert batch.paths.nodes.shape == (2, 6, 2)
    assert not batch.paths.mask.any() and (batch.paths.nodes == -1).all()
    empty = TemporalSampler(g, [3]).sample(np.zeros(0, np.int64), np.zeros(0))
    assert empty.num_roots == 0 and empty.paths.nodes.shape == (0, 3, 1)


def test_bad_sampler_arguments_raise():
    g = TemporalGraph([0, 1], [1, 2], [1.0, 2.0])
    with pytest.raises(ValueError, match="fanouts\\[1\\] = 0"):
        TemporalSampler(g, [2, 0])
    with pytest.raises(ValueError, match="at least one layer"):
        TemporalSampler(g, [])
    with pytest.raises(TypeError, match="fanouts\\[0\\]"):
        TemporalSampler(g, [2.5])
    with pytest.raises(ValueError, match="strategy"):
        TemporalSampler(g, [2], strategy="latest")
    with pytest.raises(ValueError, match="time_rule"):
        TemporalSampler(g, [2], time_rule="before")
    with pytest.raises(ValueError, match="replace"):
        TemporalSampler(g, [2], replace=True)
    with pytest.raises(ValueError, match="num_threads"):
        TemporalSampler(g, [2], num_threads=0)
    with pytest.raises(TypeError, match="TemporalGraph"):
        TemporalSampler("graph", [2])
    s = TemporalSampler(g, [2])
    with pytest.raises(ValueError, match=r"nodes\[1\] = 3 is out of range \[0, 3\)"):
        s.sample([0, 3], [1.0, 1.0])
    with pytest.raises(ValueError, match="negative"):
        s.sample([-1], [1.0])
    with pytest.raises(ValueError, match="not a finite time"):
        s.sample([0, 1], [1.0, np.nan])
    with pytest.raises(ValueError, match="same length"):
        s.sample([0, 1], [1.0])
    with pytest.raises(TypeError, match="integer ids"):
        s.sample([0.0], [1.0])
    with pytest.raises(ValueError, match="1-D"):
        s.sample([[0]], [[1.0]])
    with pytest.raises(ValueError, match="batch_id"):
        s.sample([0], [1.0], batch_id=-1)


def test_batch_moves_and_passes_through_a_dataloader():
    rng = np.random.default_rng(12)
    src, dst, ts = ref.random_graph(rng, 40, 300)
    g = TemporalGraph(src, dst, ts, num_nodes=40)
    sampler = TemporalSampler(g, [3, 2], seed=1)
    roots = [(int(src[i]), float(ts[i])) for i in range(0, 300, 10)]

    def collate(items):
        nodes, times = zip(*items)
        return sampler.sample(list(nodes), list(times))

    loader = torch.utils.data.DataLoader(roots, batch_size=8, collate_fn=collate)
    batches = list(loader)
    assert len(batches) == 4 and all(isinstance(b, TemporalBatch) for b in batches)
    moved = batches[0].to("cpu")
    assert moved.paths.nodes.shape == batches[0].paths.nodes.shape
    assert moved.device == torch.device("cpu")
    # Batches cross process boundaries (DataLoader workers) by pickling.
    clone = pickle.loads(pickle.dumps(batches[0]))
    assert torch.equal(clone.paths.src_index, batches[0].paths.src_index)
    assert torch.equal(clone.blocks[0].edata["dt"], batches[0].blocks[0].edata["dt"])


def test_sampler_is_picklable_for_worker_processes():
    rng = np.random.default_rng(13)
    src, dst, ts = ref.random_graph(rng, 30, 200)
    g = TemporalGraph(src, dst, ts, num_nodes=30)
    s = TemporalSampler(g, [3, 3], strategy="uniform", seed=4)
    clone = pickle.loads(pickle.dumps(s))
    nodes, times = roots_for(rng, src, dst, ts, 20)
    a = s.sample_arrays(nodes, times, batch_id=3)
    b = clone.sample_arrays(nodes, times, batch_id=3)
    for x, y in zip(a[1], b[1]):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("num_dst,degrees", [(3, [2, 0, 1]), (4, [0, 0, 0, 0]), (1, [7])])
def test_csc_block_equals_dgl_create_block(num_dst, degrees):
    from tbdfs_dgl import _blocks

    m = sum(degrees)
    indptr = torch.tensor(np.concatenate([[0], np.cumsum(degrees)]), dtype=torch.int64)
    indices = torch.arange(num_dst, num_dst + m)
    eids = torch.randperm(m)
    ours = _blocks.csc_block(indptr, indices, eids, num_dst + m + 2, num_dst)
    ref = _blocks._standard(indptr, indices, eids, num_dst + m + 2, num_dst)
    assert _blocks._fast is _blocks._direct  # the fast path passed its self-check here
    assert _blocks._same(ours, ref)
    ours.srcdata["x"] = torch.ones(ours.num_src_nodes(), 2)
    ours.update_all(dgl.function.copy_u("x", "m"), dgl.function.sum("m", "y"))
    assert torch.equal(ours.dstdata["y"][:, 0], torch.tensor(degrees, dtype=torch.float32))


def test_csc_block_falls_back_when_dgl_internals_differ(monkeypatch):
    from tbdfs_dgl import _blocks

    def broken(*args):
        raise AttributeError("an internal that moved")

    monkeypatch.setattr(_blocks, "_direct", broken)
    monkeypatch.setattr(_blocks, "_checked", False)
    monkeypatch.setattr(_blocks, "_fast", None)
    indptr, idx = torch.tensor([0, 1]), torch.tensor([1])
    block = _blocks.csc_block(indptr, idx, torch.tensor([0]), 2, 1)
    assert _blocks._checked and _blocks._fast is None
    assert block.num_edges() == 1 and block.num_src_nodes() == 2


def _tables_equal(a, b):
    for name in ("root_nodes", "root_times"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert len(a.layers) == len(b.layers)
    for x, y in zip(a.layers, b.layers):
        for f in ("src_nodes", "src_ts", "nbr", "mask", "dt", "eid"):
            assert getattr(x, f).dtype == getattr(y, f).dtype, f
            assert torch.equal(getattr(x, f), getattr(y, f)), f


@pytest.mark.parametrize("strategy", ["recent", "uniform"])
@pytest.mark.parametrize("fanouts", [[3], [2, 3], [2, 1, 2]])
@pytest.mark.parametrize("extra", [0, 7])
def test_padded_sampling_equals_padding_the_batch(strategy, fanouts, extra):
    """``sample(pad_roots=P)`` writes what ``sample(...).padded(P)`` builds by copying (whose
    unpadded tables the reference checks), with eids mapped by ``eid_map`` as the trainer
    maps its training graph's edges back to dataset rows."""
    rng = np.random.default_rng(21)
    N = 30
    src, dst, ts = ref.random_graph(rng, N, 300)
    g = TemporalGraph(src, dst, ts, num_nodes=N)
    nodes, times = roots_for(rng, src, dst, ts, 25)
    rows = np.sort(rng.choice(10 * len(src), len(src), replace=False))  # rows of a larger set

    def draw(**kw):
        s = TemporalSampler(g, fanouts, strategy=strategy, seed=3, num_threads=1)
        return s.sample(nodes, times, batch_id=4, paths=False, **kw)

    plain = draw()
    _tables_equal(draw(pad_roots=len(nodes) + extra), plain.padded(len(nodes) + extra))
    mapped = plain.padded(len(nodes) + extra)
    for t in mapped.layers:
        t.eid = torch.where(t.eid >= 0, torch.from_numpy(rows)[t.eid.clamp(min=0)], t.eid)
    _tables_equal(draw(pad_roots=len(nodes) + extra, eid_map=rows), mapped)
    unpadded_mapped = draw(eid_map=rows)
    for x, y in zip(unpadded_mapped.layers, plain.layers):
        want = torch.where(y.eid >= 0, torch.from_numpy(rows)[y.eid.clamp(min=0)], y.eid)
        assert torch.equal(x.eid, want)
        assert torch.equal(x.nbr, y.nbr) and torch.equal(x.dt, y.dt)


def test_padding_and_eid_map_refuse_bad_requests():
    rng = np.random.default_rng(22)
    src, dst, ts = ref.random_graph(rng, 20, 100)
    g = TemporalGraph(src, dst, ts, num_nodes=20)
    s = TemporalSampler(g, [2, 2], seed=0)
    nodes, times = roots_for(rng, src, dst, ts, 10)
    with pytest.raises(ValueError, match="paths=False"):
        s.sample(nodes, times, pad_roots=12)
    with pytest.raises(ValueError, match="smaller than the batch"):
        s.sample(nodes, times, paths=False, pad_roots=5)
    with pytest.raises(TypeError, match="pad_roots must be an int"):
        s.sample(nodes, times, paths=False, pad_roots=12.0)
    with pytest.raises(ValueError, match="eid_map has 99 entries, the graph has 100"):
        s.sample(nodes, times, eid_map=np.arange(99))
    with pytest.raises(ValueError, match="eid_map"):
        s.sample(nodes, times, eid_map=-np.arange(100))
    with pytest.raises(ValueError, match="pad_roots"):  # the C++ checks, called directly
        s._run(*s._check_roots(nodes, times), None, True, True, 12)
    with pytest.raises(ValueError, match="outside eid_map"):  # likewise
        s._run(*s._check_roots(nodes, times), None, False, True, 0, np.arange(3, dtype=np.int64))
