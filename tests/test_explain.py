"""Path-level explanations: the aggregator's attention, returned and checked against the
forward pass."""
import numpy as np
import pytest
import torch

from tbdfs_dgl import TBDFSModel, TemporalGraph, TemporalSampler
from tbdfs_dgl.explain import root_paths

import reference as ref


def setup(alpha=0.5, across_paths_agg="attn", num_heads=2, seed=0):
    rng = np.random.default_rng(seed)
    src, dst, ts = ref.random_graph(rng, 25, 400, num_times=100)
    g = TemporalGraph(src, dst, ts, num_nodes=25)
    ef = torch.randn(400, 3)
    model = TBDFSModel(0, 3, 8, 8, num_heads=num_heads, alpha=alpha, across_paths_agg=across_paths_agg,
                       num_nodes=25, node_embedding_dim=4).eval()
    batch = TemporalSampler(g, [3, 4], strategy="uniform", seed=seed).sample(
        rng.integers(0, 23, 12), rng.uniform(20, 110, 12))
    return model, batch, ef


@pytest.mark.parametrize("alpha", [0.5, "learn"])
def test_weights_sum_to_one_and_are_those_the_forward_pass_used(alpha):
    model, batch, ef = setup(alpha)
    with torch.no_grad():
        h, att = model(batch, None, ef, get_attention=True)
        assert torch.equal(h, model(batch, None, ef))  # opt-in changes nothing
        B, P, H = att.weight.shape
        has = att.mask.any(dim=1)
        sums = att.weight.sum(dim=1)  # [B, H]
        torch.testing.assert_close(sums[has], torch.ones_like(sums[has]))
        assert (att.weight[~att.mask] == 0).all()
        # h_DFS recomputed from the weights and the path representations r_p.
        xs = model._layer_edge_inputs(batch, ef)
        hs = model._bfs(batch, None, xs)
        r, mask = model.path_encoder.encode_tree(batch.layers, hs[0], hs[0][:B],
                                                 batch.root_times, xs)
        assert torch.equal(mask, att.mask)
        agg = torch.einsum("bph,bpd->bhd", att.weight, r)
        h_dfs = model.path_aggregator.fc_o(agg.reshape(B, -1))
        torch.testing.assert_close(h_dfs[has], att.h_dfs[has], rtol=1e-4, atol=1e-5)
        a = att.alpha
        torch.testing.assert_close(h, a * att.h_bfs + (1 - a) * att.h_dfs)
    for root in range(B):
        ex = model.explain(batch, edge_feat=ef, root=root, top_k=P)
        if has[root]:
            assert ex["weight_total"] == pytest.approx(1.0, abs=1e-5)
            assert sum(p["weight"] for p in ex["paths"]) == pytest.approx(1.0, abs=1e-5)
        expected_alpha = float(a[root]) if alpha == "learn" else 0.5
        assert ex["alpha"] == pytest.approx(expected_alpha)
        assert ex["bfs_share"] + ex["dfs_share"] == pytest.approx(1.0)


def test_top_paths_are_the_heaviest_and_read_as_batch_paths():
    model, batch, ef = setup()
    _, att = model(batch, None, ef, get_attention=True)
    w = att.weight.mean(-1) * att.mask
    root = int(torch.argmax(att.mask.sum(1)))
    ex = model.explain(batch, edge_feat=ef, root=root, top_k=3)
    assert [p["weight"] for p in ex["paths"]] == pytest.approx(
        torch.topk(w[root], 3).values.tolist())
    slots = torch.topk(w[root], 3).indices.tolist()
    paths = batch.paths
    for p, slot in zip(ex["paths"], slots):
        m = paths.mask[root, slot]
        assert p["nodes"] == [int(batch.root_nodes[root])] + paths.nodes[root, slot][m].tolist()
        assert p["eids"] == paths.eids[root, slot][m].tolist()
        assert p["ts"] == paths.ts[root, slot][m].tolist()
        assert all(t < float(batch.root_times[root]) for t in p["ts"])  # strict rule
    # every chain of every root, against the sampler's own path explosion
    for b in range(batch.num_roots):
        slots = torch.nonzero(att.mask[b]).flatten().tolist()
        for path, slot in zip(root_paths(batch, b, slots), slots):
            m = paths.mask[b, slot]
            assert path["eids"] == paths.eids[b, slot][m].tolist()


def test_mean_aggregation_gives_uniform_weights_and_alpha_one_gives_no_paths():
    model, batch, ef = setup(across_paths_agg="mean")
    root = int(torch.argmax(batch.paths.mask.any(-1).sum(1)))
    ex = model.explain(batch, edge_feat=ef, root=root, top_k=100)
    n = ex["num_paths"]
    assert n > 1 and all(p["weight"] == pytest.approx(1 / n) for p in ex["paths"])
    model, batch, ef = setup(alpha=1.0)
    ex = model.explain(batch, edge_feat=ef, root=0)
    assert ex["paths"] == [] and ex["alpha"] == 1.0 and ex["bfs_share"] == 1.0


def test_a_link_is_explained_from_both_endpoints_with_its_score():
    model, batch, ef = setup()
    model.train()
    ex = model.explain(batch, edge_feat=ef, root=(0, 1), top_k=2, node_ids=np.arange(25) + 1000)
    assert model.training  # restored
    with torch.no_grad():
        model.eval()
        h = model(batch, None, ef)
        assert ex["score"] == pytest.approx(float(model.score(h[:1], h[1:2])[0]), rel=1e-5)
    assert ex["src"]["root"] == int(batch.root_nodes[0]) + 1000
    assert all(n >= 1000 for p in ex["dst"]["paths"] for n in p["nodes"])
    assert 0 < ex["probability"] < 1
    with pytest.raises(IndexError, match="not a root"):
        model.explain(batch, edge_feat=ef, root=99)
    with pytest.raises(ValueError, match="top_k"):
        model.explain(batch, edge_feat=ef, root=0, top_k=0)


def test_raw_ids_may_be_names_and_must_cover_the_batch():
    model, batch, ef = setup()
    names = [f"user-{i}" for i in range(25)]
    ex = model.explain(batch, edge_feat=ef, root=0, top_k=3, node_ids=names)
    assert ex["root"] == names[int(batch.root_nodes[0])]
    assert ex["paths"] and all(n in names for p in ex["paths"] for n in p["nodes"])
    plain = model.explain(batch, edge_feat=ef, root=0, top_k=3)
    assert [[names[n] for n in p["nodes"]] for p in plain["paths"]] == \
        [p["nodes"] for p in ex["paths"]]
    as_numpy = model.explain(batch, edge_feat=ef, root=0, node_ids=np.arange(25) * 10)
    assert type(as_numpy["root"]) is int  # JSON-ready, not a NumPy scalar
    with pytest.raises(ValueError, match="node_ids has 3 entries, but the batch refers to node"):
        model.explain(batch, edge_feat=ef, root=0, node_ids=names[:3])


def test_alpha_recorder_holds_the_gates_values_of_the_roots_with_a_path():
    from tbdfs_dgl.explain import AlphaRecorder

    model, _, ef = setup("learn")
    rng = np.random.default_rng(1)
    src, dst, ts = ref.random_graph(rng, 25, 400, num_times=100)
    g = TemporalGraph(src, dst, ts, num_nodes=25)
    # Queries at time 0 see no history, hence no path: those roots must be left out.
    batch = TemporalSampler(g, [3, 4], strategy="uniform", seed=1).sample(
        rng.integers(0, 23, 16), np.r_[np.zeros(4), rng.uniform(20, 110, 12)])
    with torch.no_grad():
        _, att = model(batch, None, ef, get_attention=True)
        has = att.mask.any(dim=1)
        assert 0 < int(has.sum()) < batch.num_roots  # both kinds of root are in the batch
        expected = att.alpha.reshape(-1)[has].double().numpy()
        with AlphaRecorder(model) as rec:
            model(batch, None, ef)
            model(batch, None, ef)  # a second batch adds to the first
        model(batch, None, ef)  # outside the `with`: not recorded
    s = rec.summary()
    assert s["roots"] == 2 * batch.num_roots and s["roots_with_path"] == 2 * len(expected)
    assert s["mean"] == pytest.approx(expected.mean(), rel=1e-6)
    assert s["std"] == pytest.approx(expected.std(), rel=1e-4, abs=1e-9)
    # Each quantile is the upper edge of the bin holding the order statistic it names.
    values = np.sort(np.concatenate([expected, expected]))
    for q in (10, 50, 90):
        k = int(np.ceil(q / 100 * len(values))) - 1
        assert values[k] <= s[f"p{q}"] <= values[k] + 1.0 / AlphaRecorder.BINS + 1e-12
    # Pooled over two "ranks" holding the same values: counts double, figures stay.
    pooled = rec.summary(reduce=lambda a: 2 * a)
    assert pooled["roots_with_path"] == 2 * s["roots_with_path"]
    assert pooled["mean"] == pytest.approx(s["mean"]) and pooled["p50"] == s["p50"]


def test_alpha_recorder_refuses_a_fixed_alpha_and_reentry():
    from tbdfs_dgl.explain import AlphaRecorder

    with pytest.raises(ValueError, match="learned gate"):
        AlphaRecorder(setup(0.5)[0])
    rec = AlphaRecorder(setup("learn")[0])
    assert np.isnan(rec.summary()["mean"]) and rec.summary()["roots_with_path"] == 0
    with rec:
        with pytest.raises(RuntimeError, match="already recording"):
            rec.__enter__()
