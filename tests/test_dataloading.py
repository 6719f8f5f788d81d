"""TemporalEdgeSampler: DGL's DataLoader over timestamped seed edges."""
import numpy as np
import pytest
import torch

from tbdfs_dgl import TemporalGraph, TemporalSampler
from conftest import optional_dgl

dgl = optional_dgl()  # a stand-in in sanitizer mode: tests that use it are skipped


@pytest.fixture
def graph():
    rng = np.random.default_rng(0)
    n, nodes = 400, 40
    ts = np.sort(rng.integers(0, 150, n)).astype(np.float64)  # repeated times included
    return TemporalGraph(rng.integers(0, nodes, n), rng.integers(0, nodes, n), ts,
                         num_nodes=nodes,
                         edge_feat=rng.normal(size=(n, 4)).astype(np.float32),
                         node_feat=rng.normal(size=(nodes, 3)).astype(np.float32))


def edge_sampler(graph, **kw):
    from tbdfs_dgl.dataloading import TemporalEdgeSampler

    return TemporalEdgeSampler(TemporalSampler(graph, [3, 2], strategy="uniform", seed=5,
                                               num_threads=1), **kw)


def load(graph, sampler, num_workers=0, batch_size=64, eids=None):
    eids = torch.arange(graph.num_edges) if eids is None else eids
    loader = dgl.dataloading.DataLoader(graph.to_dgl(), eids, sampler, batch_size=batch_size,
                                        shuffle=False, num_workers=num_workers)
    # With workers DGL interleaves the workers' contiguous shares of batches: key by content.
    return sorted(loader, key=lambda b: int(b[1].edata[dgl.EID][0]))


def assert_same_blocks(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert (x.num_src_nodes(), x.num_dst_nodes()) == (y.num_src_nodes(), y.num_dst_nodes())
        for u, v in zip(x.edges(order="eid"), y.edges(order="eid")):
            assert torch.equal(u, v)
        for key in (dgl.NID, "ts"):
            assert torch.equal(x.srcdata[key], y.srcdata[key])
            assert torch.equal(x.dstdata[key], y.dstdata[key])
        for key in (dgl.EID, "dt"):
            assert torch.equal(x.edata[key], y.edata[key])


def test_batches_are_the_samplers_batches_of_the_seed_instances(graph):
    sampler = edge_sampler(graph)
    src, dst, ts = graph.edges()
    batches = load(graph, sampler)
    assert sum(b[1].num_edges() for b in batches) == graph.num_edges
    for input_nodes, pair, blocks in batches:
        eids = pair.edata[dgl.EID].numpy()
        u, v = (t.numpy() for t in pair.edges(order="eid"))
        nid, nts = pair.ndata[dgl.NID].numpy(), pair.ndata["ts"].numpy()
        np.testing.assert_array_equal(nid[u], src[eids])
        np.testing.assert_array_equal(nid[v], dst[eids])
        np.testing.assert_array_equal(nts[u], ts[eids])
        np.testing.assert_array_equal(nts[v], ts[eids])
        np.testing.assert_array_equal(pair.edata["ts"].numpy(), ts[eids])
        # One node per distinct (node, time) instance.
        assert len(set(zip(nid.tolist(), nts.tolist()))) == pair.num_nodes()
        expected = sampler.sampler.sample(pair.ndata[dgl.NID], pair.ndata["ts"],
                                          batch_id=sampler.batch_stream(eids)).blocks
        assert_same_blocks(blocks, expected)
        assert torch.equal(input_nodes, blocks[0].srcdata[dgl.NID])
        assert torch.equal(blocks[-1].dstdata[dgl.NID], pair.ndata[dgl.NID])
        for block in blocks:  # strictly before each instance's time: no seed edge leaks
            assert (block.edata["dt"] > 0).all()


def test_workers_give_the_same_batches(graph):
    sampler = edge_sampler(graph, negatives=2)
    one, two = load(graph, sampler, 0), load(graph, sampler, 2)
    assert len(one) == len(two) == 7
    for a, b in zip(one, two):
        for ga, gb in [(a[1], b[1]), (a[2], b[2])]:
            for u, v in zip(ga.edges(order="eid"), gb.edges(order="eid")):
                assert torch.equal(u, v)
            assert torch.equal(ga.ndata[dgl.NID], gb.ndata[dgl.NID])
        assert_same_blocks(a[3], b[3])
    sampler.set_epoch(1)  # another epoch, other streams
    other = load(graph, sampler, 0)
    assert any(not torch.equal(a[3][0].srcdata[dgl.NID], b[3][0].srcdata[dgl.NID])
               for a, b in zip(one, other))


def test_negatives_share_the_seed_source_instance_and_time(graph):
    sampler = edge_sampler(graph, negatives=3)
    candidates = set(np.unique(graph.edges()[1]).tolist())
    for _, pair, neg, blocks in load(graph, sampler):
        assert neg.num_edges() == 3 * pair.num_edges()
        pu, _ = pair.edges(order="eid")
        nu, nv = neg.edges(order="eid")
        assert torch.equal(nu, pu.repeat_interleave(3))  # u@t is one instance
        assert torch.equal(neg.edata["ts"], pair.edata["ts"].repeat_interleave(3))
        assert torch.equal(neg.ndata["ts"][nv], neg.edata["ts"])
        assert set(neg.ndata[dgl.NID][nv].tolist()) <= candidates
        assert blocks[-1].num_dst_nodes() == pair.num_nodes() == neg.num_nodes()


def test_dgl_negative_sampler_and_prefetched_features(graph):
    sampler = edge_sampler(graph, negatives=dgl.dataloading.negative_sampler.Uniform(2),
                           prefetch_node_feats=["feat"], prefetch_edge_feats=["feat"])
    g = graph.to_dgl()
    _, pair, neg, blocks = load(graph, sampler)[2]
    assert neg.num_edges() == 2 * pair.num_edges()
    assert torch.equal(neg.edata["ts"], pair.edata["ts"].repeat_interleave(2))
    assert torch.equal(blocks[0].srcdata["feat"], g.ndata["feat"][blocks[0].srcdata[dgl.NID]])
    for block in blocks:
        assert torch.equal(block.edata["feat"], g.edata["feat"][block.edata[dgl.EID]])


def test_batch_output_feeds_the_model(graph):
    from tbdfs_dgl import TBDFSModel

    sampler = edge_sampler(graph, negatives=1, output="batch")
    input_nodes, pair, neg, batch = load(graph, sampler)[3]
    eids = pair.edata[dgl.EID].numpy()
    expected = sampler.sampler.sample(pair.ndata[dgl.NID], pair.ndata["ts"],
                                      batch_id=sampler.batch_stream(eids), paths=False)
    for x, y in zip(batch.layers, expected.layers):
        for name in ("src_nodes", "src_ts", "nbr", "mask", "dt", "eid"):
            assert torch.equal(getattr(x, name), getattr(y, name))
    assert torch.equal(input_nodes, batch.layers[0].src_nodes)
    model = TBDFSModel(3, 4, 8, 8).eval()
    with torch.no_grad():
        h = model(batch, graph.node_feat, graph.edge_feat)
        u, v = pair.edges(order="eid")
        score = model.score(h[u], h[v])
    assert score.shape == (pair.num_edges(),) and torch.isfinite(score).all()


def test_bad_input_is_named(graph):
    from tbdfs_dgl.dataloading import TemporalEdgeSampler

    with pytest.raises(TypeError, match="TemporalSampler"):
        TemporalEdgeSampler(graph)
    with pytest.raises(ValueError, match="negatives"):
        edge_sampler(graph, negatives=0)
    with pytest.raises(ValueError, match="output"):
        edge_sampler(graph, output="tables")
    with pytest.raises(ValueError, match="output='blocks'"):
        edge_sampler(graph, output="batch", prefetch_node_feats=["feat"])
    sampler = edge_sampler(graph)
    with pytest.raises(IndexError, match="seed edge ids"):
        sampler.sample(graph.to_dgl(), torch.tensor([graph.num_edges]))
    with pytest.raises(ValueError, match="edges"):
        sampler.sample(dgl.graph(([0], [1])), torch.tensor([0]))
    with pytest.raises(ValueError, match="epoch"):
        sampler.set_epoch(-1)


def test_example_runs():
    import runpy
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "dataloader_example.py"
    main = runpy.run_path(str(path))["main"]
    metrics = main(["--steps", "2", "--candidates", "5"])
    assert metrics["count"] == 800 and metrics["candidates"] == 5
    assert 0.0 < metrics["mrr"] <= 1.0 and metrics["hits@1"] <= metrics["hits@3"] <= 1.0
