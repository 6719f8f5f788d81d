"""The dense, DGL-free model against the previous release's computation (DGL blocks and the
per-slot path encoder, tests/reference_model.py): same embeddings, same gradients."""
import copy

import dgl
import numpy as np
import pytest
import torch

from tbdfs_dgl import TemporalGraph, TemporalSampler
from tbdfs_dgl.batch import TemporalBatch
from tbdfs_dgl.model import TBDFSModel

from tbdfs_dgl._reference import reference_forward
from test_model import EDGE_DIM, NODE_DIM, NUM_EDGES, NUM_NODES, features, make_batch

torch.set_num_threads(1)

VARIANTS = [
    {},
    {"path_inputs": "bfs"},
    {"within_path_agg": "mean"},
    {"across_paths_agg": "mean"},
    {"within_path_agg": "mean", "across_paths_agg": "mean"},
    {"alpha": "learn"},
    {"alpha": 0.0},
    {"alpha": 1.0},
    {"use_time": False},
    {"node_dim": 0},
    {"node_dim": 0, "edge_dim": 0},
    {"num_nodes": NUM_NODES, "node_embedding_dim": 3},
    {"num_heads": 1},
    {"time_encoding": "cos_phase"},
    {"time_encoding": "cos_phase", "alpha": 1.0},
    {"time_encoding": "cos_sin_unscaled"},
    {"attn_norm": True, "attn_dim": 20},
    {"attn_norm": True, "attn_init": "torch"},
    {"attn_norm": True, "attn_dim": None, "attn_init": None},  # today's model defaults
    {"attn_norm": True, "alpha": 1.0, "path_inputs": "bfs"},
    {"empty_neighbourhood": "padding"},
    {"attn_norm": True, "attn_dim": None, "attn_init": None, "empty_neighbourhood": "padding"},
    {"node_dim": 0, "edge_dim": 0, "empty_neighbourhood": "padding", "alpha": 1.0},
    {"attn_norm": True, "attn_dim": None, "attn_init": None, "empty_neighbourhood": "padding",
     "attn_residual": True},
    {"node_dim": 0, "edge_dim": 0, "attn_norm": True, "attn_residual": True, "alpha": 1.0},
    {"attn_norm": True, "attn_dim": None, "attn_init": None,
     "empty_neighbourhood": "padding_node"},
    {"node_dim": 0, "edge_dim": 0, "empty_neighbourhood": "padding_node", "alpha": 1.0},
    {"empty_neighbourhood": "padding_node", "use_time": False},
]


def build(seed=0, **kw):
    # release 0.1's formulation unless a variant says otherwise (the reference is 0.1's)
    args = dict(node_dim=NODE_DIM, edge_dim=EDGE_DIM, time_dim=8, hidden_dim=12,
                num_heads=2, dropout=0.0, time_encoding="cos_sin", attn_norm=False,
                empty_neighbourhood="zero")
    args.update(kw)
    torch.manual_seed(seed)
    return TBDFSModel(**args).eval()


def inputs(model):
    nf, ef = features()
    return (nf if model.node_dim else None), (ef if model.edge_dim else None)


def rel_close(a, b, rtol):
    scale = max(1.0, float(b.abs().max())) if b.numel() else 1.0
    return float((a - b).abs().max()) <= rtol * scale if a.numel() else True


def check_same(model, batch, rtol_out=1e-5, rtol_grad=1e-4):
    nf, ef = inputs(model)
    ref_model = copy.deepcopy(model)
    out = model(batch, nf, ef)
    ref = reference_forward(ref_model, batch, nf, ef)
    assert out.shape == ref.shape
    assert rel_close(out, ref, rtol_out), float((out - ref).abs().max())
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=out.dtype)
    (out * w).sum().backward()
    (ref * w).sum().backward()
    # The float32 rounding floor every gradient shares.  An attention key's or query's
    # gradient is a difference of nearly equal terms (softmax backward) whose size is that of
    # the model's largest gradients, so its rounding error is a few eps of that scale, not of
    # its own, cancelled value: 8 eps of the largest measured on an AVX-512 Xeon, where the
    # own-scale bound alone failed (path_aggregator.fc_k, 3 layers).  A real difference moves
    # a gradient by a sizeable part of itself: above this floor unless that gradient is
    # itself below ~1e-5 of the largest, which this check then cannot see.
    largest = max((float(q.grad.abs().max()) for q in ref_model.parameters()
                   if q.grad is not None), default=0.0)
    floor = 64 * torch.finfo(torch.float32).eps * largest
    for (name, p), (_, q) in zip(model.named_parameters(), ref_model.named_parameters()):
        if q.grad is None:
            assert p.grad is None or not p.grad.abs().any(), name
            continue
        scale = float(q.grad.abs().max())
        err = float((p.grad - q.grad).abs().max())
        assert err <= rtol_grad * max(scale, 1e-12) + floor + 1e-12, (name, err, scale, floor)


@pytest.mark.parametrize("kw", VARIANTS)
@pytest.mark.parametrize("L", [1, 2, 3])
def test_dense_equals_reference_on_hand_batches(kw, L):
    dgl.seed(0)
    batch = make_batch(6, [3, 2, 2][:L], seed=10 + L, p_neighbour=0.6)
    model = build(num_layers=L, **kw)
    check_same(model, batch)


def test_dense_equals_reference_without_any_history():
    batch = make_batch(4, [3, 2], seed=3, p_neighbour=0.0)
    for kw in ({}, {"alpha": "learn"}, {"alpha": 0.0}, {"empty_neighbourhood": "padding"}):
        check_same(build(**kw), batch)


def sampled_batch(strategy, fanouts, seed=0, num_roots=40):
    rng = np.random.default_rng(seed)
    n, m = NUM_NODES, NUM_EDGES
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    ts = np.sort(rng.integers(0, 60, m)).astype(np.float64)  # ties on purpose
    g = TemporalGraph(src, dst, ts, num_nodes=n)
    s = TemporalSampler(g, fanouts, strategy=strategy, seed=seed, num_threads=1)
    roots = rng.integers(0, n, num_roots)
    times = rng.uniform(0, 70, num_roots)
    return s.sample(roots, times)


@pytest.mark.parametrize("strategy", ["recent", "uniform"])
@pytest.mark.parametrize("fanouts", [[4], [3, 2], [2, 2, 2]])
@pytest.mark.parametrize("kw", [{}, {"path_inputs": "bfs", "alpha": "learn"},
                                {"node_dim": 0, "within_path_agg": "mean"}])
def test_dense_equals_reference_on_sampled_batches(strategy, fanouts, kw):
    batch = sampled_batch(strategy, fanouts, seed=len(fanouts))
    model = build(num_layers=len(fanouts), **kw)
    check_same(model, batch)


def test_sampled_tables_match_their_blocks():
    batch = sampled_batch("uniform", [3, 2], seed=5)
    from tbdfs_dgl._tables import table_from_block

    for table, block in zip(batch.layers, batch.blocks):
        again = table_from_block(block, fanout=table.fanout)
        for name in ("src_nodes", "src_ts", "nbr", "mask", "dt", "eid"):
            assert torch.equal(getattr(table, name), getattr(again, name)), name


def test_a_batch_made_from_blocks_gets_the_same_tables():
    batch = sampled_batch("recent", [3, 2], seed=6)
    again = TemporalBatch(batch.root_nodes, batch.root_times, batch.blocks, batch.paths)
    model = build()
    nf, ef = inputs(model)
    assert torch.allclose(model(again, nf, ef), model(batch, nf, ef), atol=1e-12)


@pytest.mark.parametrize("kw", [{}, {"alpha": 1.0}, {"alpha": "learn", "path_inputs": "bfs"}])
def test_padded_batches_give_the_same_roots(kw):
    batch = sampled_batch("uniform", [3, 2], seed=7, num_roots=30)
    model = build(**kw)
    nf, ef = inputs(model)
    out = model(batch, nf, ef)
    padded = batch.padded(45)
    assert padded.num_roots == 45 and padded.paths is None
    sizes = [(t.num_dst, t.num_src) for t in padded.layers]
    assert sizes == [(45 * 3, 45 * 3 * 4), (45, 45 * 3)]  # fixed by the fanouts alone
    out_p = model(padded, nf, ef)
    assert out_p.shape == (45, out.shape[1]) and torch.isfinite(out_p).all()
    assert torch.allclose(out_p[:30], out, atol=1e-6)
    with pytest.raises(ValueError, match="smaller than the batch"):
        batch.padded(10)


def test_empty_batch_is_refused_clearly():
    batch = sampled_batch("recent", [3, 2], seed=8, num_roots=0)
    with pytest.raises(ValueError, match="no roots"):
        build()(batch, *inputs(build()))


def test_batch_moves_and_pickles_without_building_blocks():
    import pickle

    batch = sampled_batch("recent", [3, 2], seed=9)
    moved = batch.to("cpu")
    assert moved._blocks is None and len(moved.layers) == 2
    again = pickle.loads(pickle.dumps(batch))
    model = build()
    nf, ef = inputs(model)
    assert torch.equal(model(again, nf, ef), model(batch, nf, ef))


@pytest.mark.parametrize("kw", [{}, {"node_dim": 0, "num_nodes": NUM_NODES,
                                     "node_embedding_dim": 3},
                                {"num_nodes": NUM_NODES, "node_embedding_dim": 3}])
def test_node_inputs_projected_per_node_or_per_instance_agree(kw):
    model = build(**kw)
    nf, _ = inputs(model)
    g = torch.Generator().manual_seed(0)
    for n in (7, NUM_NODES, 3 * NUM_NODES):  # fewer, as many and more instances than nodes
        nids = torch.randint(0, NUM_NODES, (n,), generator=g)
        parts = ([nf[nids]] if model.node_dim else []) + (
            [model.node_embedding(nids)] if model.node_embedding is not None else [])
        want = model.node_proj(torch.cat(parts, dim=-1))
        assert torch.allclose(model._node_inputs(nids, nf), want, atol=1e-6)


@pytest.mark.parametrize("kw", [{}, {"node_dim": 0, "edge_dim": 0}, {"node_dim": 0},
                                {"attn_norm": True, "empty_neighbourhood": "padding"}])
def test_onednn_products_give_the_reference_results(kw, monkeypatch):
    # Every CPU product that real batches send to oneDNN (tbdfs_dgl.nn._gemm: 16,384 rows,
    # widths >= 16) goes there at test sizes too, and the model still computes the reference.
    from tbdfs_dgl.nn import _gemm

    if _gemm._linear_op() is None:
        pytest.skip("this torch has no oneDNN linear op on this CPU")
    monkeypatch.delenv("TBDFS_CPU_GEMM", raising=False)
    monkeypatch.setattr(_gemm, "_ONEDNN_MIN_ROWS", 1)
    monkeypatch.setattr(_gemm, "_ONEDNN_MIN_WIDTH", 1)
    calls = []
    for fn in (_gemm._OneDNNLinear, _gemm._FewOutputsLinear):
        apply = fn.apply
        monkeypatch.setattr(fn, "apply", lambda *a, _f=fn, _apply=apply:
                            calls.append(_f.__name__) or _apply(*a))
    batch = sampled_batch("uniform", [3, 2], seed=8)
    check_same(build(num_layers=2, **kw), batch)
    assert "_OneDNNLinear" in calls
    if kw.get("node_dim") == 0:  # featureless first layers score with few_outputs_linear
        assert "_FewOutputsLinear" in calls


@pytest.mark.parametrize("kw", [{}, {"time_encoding": "cos_phase"}, {"node_dim": 0},
                                {"within_path_agg": "mean", "alpha": "learn"}])
def test_padded_products_give_the_reference_results(kw, monkeypatch):
    # Every long CPU product takes the zero-padded GEMM (tbdfs_dgl.nn._gemm), which
    # otherwise only real-sized batches reach (width 12 is not a multiple of 16).
    from tbdfs_dgl.nn import _gemm

    monkeypatch.setattr(_gemm, "_PAD_MIN_OUTPUT", 1)
    calls = []
    apply = _gemm.PaddedLinear.apply
    monkeypatch.setattr(_gemm.PaddedLinear, "apply",
                        lambda *a: calls.append(1) or apply(*a))
    batch = sampled_batch("uniform", [3, 2], seed=7)
    check_same(build(num_layers=2, **kw), batch)
    assert calls
