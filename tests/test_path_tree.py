"""PathEncoder.encode_tree (paths read from the layer tables, shared per instance) against
PathEncoder.forward (the per-slot reference over a PathBatch of the same sampled tree)."""

import dataclasses
import math

import dgl
import numpy as np
import pytest
import torch

from tbdfs_dgl._tables import table_from_block
from test_model import make_batch
from tbdfs_dgl.nn import PathAggregator, PathEncoder
from tbdfs_dgl.nn import _distinct as distinct
from tbdfs_dgl.nn.time_encoder import TimeEncoder

torch.set_num_threads(1)

try:  # the compiled sampler is optional for the hand-made tests
    from tbdfs_dgl import TemporalGraph, TemporalSampler
except Exception:  # pragma: no cover - only while the extension is not built
    TemporalGraph = TemporalSampler = None
needs_sampler = pytest.mark.skipif(TemporalSampler is None, reason="sampler not importable")

NODE_DIM, EDGE_DIM, TIME_DIM, NUM_NODES, NUM_EDGES = 5, 4, 8, 30, 80


def seed_all(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)
    dgl.seed(seed)


def make_tree(num_roots, fanouts, seed=0, p_neighbour=0.7, empty_roots=()):
    """Hand-made sampled tree (``tests/test_model.py``'s ``make_batch``): DGL blocks, the
    PathBatch (every slot holds its whole chain, as ``csrc/paths.cpp`` writes it) and the
    root times."""
    batch = make_batch(num_roots, fanouts, seed, p_neighbour, NUM_NODES, NUM_EDGES,
                       empty_roots=empty_roots)
    return batch.blocks, batch.paths, batch.root_times


def tables_of(blocks, fanouts):
    # Explicit widths: a table as wide as the sampler's fanout keeps P = prod(fanouts).
    return [table_from_block(b, fanout=k) for b, k in zip(blocks, fanouts)]


class DoubleTimeEncoder(TimeEncoder):
    """The same encoding computed in float64 (the library's is float32 by design), for the
    float64 comparisons where float32 cancellation would blur the gradients."""

    def forward(self, dt):
        if not self.use_time:
            return torch.zeros(*dt.shape, self.time_dim, dtype=torch.float64, device=dt.device)
        phase = dt.to(torch.float64).unsqueeze(-1) * self.weight.to(torch.float64)
        out = torch.stack([torch.cos(phase), torch.sin(phase)], -1).flatten(-2)
        return out * math.sqrt(1.0 / self.num_freqs)


def make_encoder(within_path_agg="attn", num_heads=2, edge=False, use_time=True, double=False,
                 attn_drop=0.0, out=12):
    cls = DoubleTimeEncoder if double else TimeEncoder
    enc = PathEncoder(NODE_DIM, out, num_heads, edge_dim=EDGE_DIM if edge else 0,
                      within_path_agg=within_path_agg, attn_drop=attn_drop,
                      time_encoder=cls(TIME_DIM, use_time=use_time))
    with torch.no_grad():  # frequencies that make the time terms matter on these gaps
        if enc.time_encoder.weight is not None:
            enc.time_encoder.weight.copy_(torch.linspace(0.05, 1.0, TIME_DIM // 2))
    return enc.double() if double else enc


def inputs(L, num_src, num_roots, feat_mode, edge, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if feat_mode == "none":
        feat = None
    elif feat_mode == "raw":
        feat = torch.randn(num_src, NODE_DIM, generator=g, dtype=dtype)
    else:  # 'bfs': one tensor per hop, indexed by that hop's source positions
        feat = [torch.randn(num_src, NODE_DIM, generator=g, dtype=dtype) for _ in range(L)]
    query = torch.randn(num_roots, NODE_DIM, generator=g, dtype=dtype)
    edge_feat = torch.randn(NUM_EDGES, EDGE_DIM, generator=g) if edge else None
    return feat, query, edge_feat


def leaves(feat, query):
    out = [query] + ([] if feat is None else [feat] if torch.is_tensor(feat) else list(feat))
    for t in out:
        t.requires_grad_(True)
    return out


def grads(enc, out, mask, weight, tensors):
    loss = (out * weight * mask.unsqueeze(-1)).sum()
    params = [p for p in enc.parameters() if p.requires_grad]
    gs = torch.autograd.grad(loss, params + tensors, allow_unused=True)
    return [torch.zeros_like(t) if g is None else g for g, t in zip(gs, params + tensors)]


def check_close(tree, ref, mask, rtol):
    assert torch.isfinite(tree).all()
    m = mask.unsqueeze(-1).expand_as(ref)
    err = (tree - ref).abs()[m]
    if err.numel():
        bound = rtol * ref.abs()[m].clamp(min=1.0)
        assert (err <= bound).all(), f"max error {err.max().item():.3g}"


def check_grads(g_tree, g_ref, rtol):
    for a, b in zip(g_tree, g_ref):
        scale = max(1e-30, b.abs().max().item())
        assert (a - b).abs().max().item() <= rtol * scale, \
            f"gradient error {(a - b).abs().max().item():.3g} vs scale {scale:.3g}"


def compare(enc, tables, paths, feat, query, root_times, edge_feat=None, project=True,
            out_rtol=1e-5, grad_rtol=1e-4, seed=0):
    """encode_tree vs forward: outputs on the path mask, mask, parameter and input
    gradients."""
    enc.eval()  # attention dropout is the one documented difference (train mode only)
    ref_leaves = leaves(feat, query)
    ref = enc._encode_slots(paths, feat, query, root_times, edge_feat, project)
    ref_mask = paths.mask.any(-1)
    tree, mask = enc._encode_tree(tables, feat, query, root_times, edge_feat, project)
    assert tree.shape == ref.shape and mask.dtype == torch.bool
    assert torch.equal(mask, ref_mask)
    check_close(tree, ref, mask, out_rtol)
    weight = torch.randn(ref.shape, generator=torch.Generator().manual_seed(seed),
                         dtype=ref.dtype)
    g_ref = grads(enc, ref, ref_mask, weight, ref_leaves)
    g_tree = grads(enc, tree, mask, weight, ref_leaves)
    check_grads(g_tree, g_ref, grad_rtol)
    return tree, mask


# ---------------------------------------------------------------------------- hand-made
FANOUTS = [[3], [3, 2], [2, 3, 2]]


@pytest.mark.parametrize("fanouts", FANOUTS, ids=lambda f: "x".join(map(str, f)))
@pytest.mark.parametrize("within_path_agg", ["attn", "mean"])
@pytest.mark.parametrize("feat_mode", ["none", "raw", "bfs"])
@pytest.mark.parametrize("num_heads", [1, 2])
@pytest.mark.parametrize("use_time", [True, False])
def test_matches_forward_float64(fanouts, within_path_agg, feat_mode, num_heads, use_time):
    seed_all(1)
    blocks, paths, rt = make_tree(5, fanouts, seed=3, empty_roots=(1,))
    tables = tables_of(blocks, fanouts)
    enc = make_encoder(within_path_agg, num_heads, use_time=use_time, double=True)
    feat, query, _ = inputs(len(fanouts), tables[0].num_src, 5, feat_mode, False, torch.float64)
    for project in (True, False):
        compare(enc, tables, paths, feat, query, rt, project=project, out_rtol=1e-10,
                grad_rtol=1e-10)


@pytest.mark.parametrize("fanouts", FANOUTS, ids=lambda f: "x".join(map(str, f)))
@pytest.mark.parametrize("within_path_agg", ["attn", "mean"])
@pytest.mark.parametrize("feat_mode", ["none", "raw", "bfs"])
@pytest.mark.parametrize("edge", [False, True])
def test_matches_forward_float32(fanouts, within_path_agg, feat_mode, edge):
    # float32 end to end, with the library's own (C++ on CPU) time encoder and edge
    # features (forward casts those to float32, so they have no float64 comparison).
    seed_all(2)
    blocks, paths, rt = make_tree(6, fanouts, seed=4, empty_roots=(0,))
    tables = tables_of(blocks, fanouts)
    enc = make_encoder(within_path_agg, 2, edge=edge)
    feat, query, edge_feat = inputs(len(fanouts), tables[0].num_src, 6, feat_mode, edge,
                                    torch.float32)
    compare(enc, tables, paths, feat, query, rt, edge_feat, project=False)


@pytest.mark.parametrize("fanouts", [[3, 2], [2, 3, 2]], ids=lambda f: "x".join(map(str, f)))
@pytest.mark.parametrize("edge", [False, True])
@pytest.mark.parametrize("within_path_agg", ["attn", "mean"])
def test_node_rows_equal_gathered_features(fanouts, edge, within_path_agg):
    # Node inputs kept per node (NodeRows: the value map once per node, then gathered)
    # give what the gathered per-instance tensor gives: outputs and every gradient, also
    # the node table's.  Without edge features the narrow parts are merged into one
    # product (merge_narrow) and the per-node map is skipped; with them it is used.
    from tbdfs_dgl.nn import NodeRows

    seed_all(5)
    blocks, paths, rt = make_tree(5, fanouts, seed=6, empty_roots=(2,))
    tables = tables_of(blocks, fanouts)
    enc = make_encoder(within_path_agg, 2, edge=edge)
    enc.train()
    g = torch.Generator().manual_seed(7)
    table = torch.randn(NUM_NODES, NODE_DIM, generator=g, requires_grad=True)
    index = torch.randint(0, NUM_NODES, (tables[0].num_src,), generator=g)
    _, query, edge_feat = inputs(len(fanouts), tables[0].num_src, 5, "none", edge,
                                 torch.float32)
    weight = torch.randn(5, 1, 12, generator=g)
    results = []
    for form in ("rows", "gathered"):
        feat = NodeRows(table, index) if form == "rows" else table[index]
        results.append(_tree_and_grads(enc, tables, feat, query, rt, edge_feat, weight,
                                       [table]))
    _check_same_tree(*results)


def _tree_and_grads(enc, tables, feat, query, rt, edge_feat, weight, inputs, retain=False):
    """``_encode_tree`` (before fc2) and the gradients of a weighted sum of it with respect
    to ``inputs`` and the encoder's parameters (zeros for unused ones, e.g. fc2)."""
    out, mask = enc._encode_tree(tables, feat, query, rt, edge_feat, False)
    params = list(inputs) + list(enc.parameters())
    gs = torch.autograd.grad((out * weight * mask.unsqueeze(-1)).sum(), params,
                             allow_unused=True, retain_graph=retain)
    return out, [torch.zeros_like(p) if x is None else x for x, p in zip(gs, params)]


def _check_same_tree(first, second):
    (a, ga), (b, gb) = first, second
    assert torch.allclose(a, b, rtol=1e-5, atol=1e-6 * b.abs().max().item())
    for x, y in zip(ga, gb):
        assert torch.allclose(x, y, rtol=1e-4, atol=1e-5 * max(1.0, y.abs().max().item()))


def _coarse_times(tables, rt):
    """The same tree with its times rounded down to multiples of 10, so that gaps repeat."""
    def down(t):
        return (t / 10).floor() * 10

    return [dataclasses.replace(t, src_ts=down(t.src_ts)) for t in tables], down(rt)


@pytest.mark.parametrize("fanouts", [[3, 2], [2, 3, 2]], ids=lambda f: "x".join(map(str, f)))
@pytest.mark.parametrize("node_rows", [False, True])
@pytest.mark.parametrize("coarse_times", [False, True], ids=["distinct_gaps", "repeated_gaps"])
def test_distinct_rows_projection_equals_per_slot(monkeypatch, fanouts, node_rows, coarse_times):
    # Wide maps on a CPU project each distinct interaction and each distinct time gap once
    # and gather (nn._distinct); forced on (whatever the share of distinct keys) and off on
    # the same inputs, outputs and every gradient (the edge table's too, made learnable
    # here, and the time encoder's) agree.
    from tbdfs_dgl.nn import NodeRows

    seed_all(8)
    blocks, paths, rt = make_tree(5, fanouts, seed=9, empty_roots=(1,))
    tables = tables_of(blocks, fanouts)
    if coarse_times:
        tables, rt = _coarse_times(tables, rt)
    torch.manual_seed(0)
    enc = PathEncoder(NODE_DIM, 16, 2, edge_dim=EDGE_DIM, time_encoder=TimeEncoder(TIME_DIM))
    g = torch.Generator().manual_seed(3)
    edge_feat = torch.randn(NUM_EDGES, EDGE_DIM, generator=g, requires_grad=True)
    table = torch.randn(NUM_NODES, NODE_DIM, generator=g, requires_grad=True)
    index = torch.randint(0, NUM_NODES, (tables[0].num_src,), generator=g)
    feat = NodeRows(table, index) if node_rows else table[index]
    query = torch.randn(5, NODE_DIM, generator=g)
    weight = torch.randn(5, 1, 16, generator=g)
    encoded = []  # the shapes the time encoder was called on
    enc.time_encoder.register_forward_hook(lambda m, args, out: encoded.append(args[0].dim()))
    monkeypatch.setattr(distinct, "MAX_SHARE", 1.0)
    results = []
    for dedupe in (True, False):
        monkeypatch.setattr(distinct, "pays", lambda *a, d=dedupe: d)
        encoded.clear()
        # (the gathered feat's graph is shared by both passes: keep it for the second)
        results.append(_tree_and_grads(enc, tables, feat, query, rt, edge_feat, weight,
                                       [edge_feat, table], retain=not node_rows))
        # the hops' gaps: one flat tensor of distinct gaps each, or the [B, n, k] tables
        assert encoded[-len(fanouts):] == [1 if dedupe else 3] * len(fanouts)
    _check_same_tree(*results)


def test_distinct_gaps_are_encoded_only_where_they_repeat(monkeypatch):
    # Above MAX_SHARE distinct gaps the gathers would cost more than they save: the gaps
    # are then encoded per instance.

    seed_all(8)
    # every slot filled (empty slots all have gap 0, which repeats)
    blocks, paths, rt = make_tree(5, [3, 2], seed=9, p_neighbour=1.0)
    tables = tables_of(blocks, [3, 2])
    assert all(t.mask.all() for t in tables)
    enc = make_encoder()
    feat, query, _ = inputs(2, tables[0].num_src, 5, "raw", False, torch.float32)
    monkeypatch.setattr(distinct, "pays", lambda *a: True)
    encoded = []
    enc.time_encoder.register_forward_hook(lambda m, args, out: encoded.append(args[0].dim()))
    for coarse_times in (False, True):
        t, r = _coarse_times(tables, rt) if coarse_times else (tables, rt)
        encoded.clear()
        enc._encode_tree(t, feat, query, r, None, False)
        # uniform(50, 100) times: all gaps distinct; rounded to tens: the gaps repeat
        assert encoded[-2:] == ([1, 1] if coarse_times else [3, 3])


def test_dedupe_rule():  # wide maps, on a CPU, outside autocast only
    cpu = torch.zeros(3, 172)
    assert distinct.pays(cpu, 172, 172) and not distinct.pays(cpu, 4, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not distinct.pays(cpu, 172, 172)


@pytest.mark.parametrize("fanouts", [[3], [3, 2]], ids=lambda f: "x".join(map(str, f)))
def test_batch_of_one_and_no_history(fanouts):
    seed_all(3)
    for empty in ((), (0,)):
        blocks, paths, rt = make_tree(1, fanouts, seed=5, p_neighbour=0.8, empty_roots=empty)
        tables = tables_of(blocks, fanouts)
        enc = make_encoder(double=True)
        feat, query, _ = inputs(len(fanouts), tables[0].num_src, 1, "raw", False,
                                torch.float64)
        out, mask = compare(enc, tables, paths, feat, query, rt, out_rtol=1e-10,
                            grad_rtol=1e-10)
        assert mask.any() != bool(empty)


def test_every_root_without_neighbours():
    seed_all(4)
    blocks, paths, rt = make_tree(3, [3, 2], seed=6, empty_roots=(0, 1, 2))
    enc = make_encoder()
    feat, query, _ = inputs(2, blocks[0].num_src_nodes(), 3, "raw", False, torch.float32)
    out, mask = enc.encode_tree(tables_of(blocks, [3, 2]), feat, query, rt)
    assert not mask.any() and torch.isfinite(out).all() and out.shape == (3, 6, 12)


def test_full_and_sparse_trees():
    # All neighbours present (every slot a full chain) and very sparse trees (most chains
    # end early, exercising the carry into digit-0 slots).
    seed_all(5)
    for p in (1.0, 0.3):
        blocks, paths, rt = make_tree(4, [2, 3, 2], seed=7, p_neighbour=p)
        enc = make_encoder(double=True)
        feat, query, _ = inputs(3, blocks[0].num_src_nodes(), 4, "bfs", False, torch.float64)
        compare(enc, tables_of(blocks, [2, 3, 2]), paths, feat, query, rt, out_rtol=1e-10,
                grad_rtol=1e-10)


def test_per_layer_edge_inputs_equal_table():
    # The model passes edge features already gathered per table slot, one tensor per layer.
    seed_all(6)
    fanouts = [2, 3, 2]
    blocks, paths, rt = make_tree(4, fanouts, seed=8)
    tables = tables_of(blocks, fanouts)
    enc = make_encoder(edge=True).eval()
    feat, query, ef = inputs(3, tables[0].num_src, 4, "raw", True, torch.float32)
    per_layer = [ef[t.eid.clamp(min=0)] for t in tables]
    a, ma = enc.encode_tree(tables, feat, query, rt, ef)
    b, mb = enc.encode_tree(tables, feat, query, rt, per_layer)
    assert torch.equal(ma, mb)
    torch.testing.assert_close(a, b)


def test_attention_dropout_train_mode():
    # Train mode differs from forward by design (per-instance numerator dropout); check it
    # is finite, actually random, and that eval mode ignores attn_drop.
    seed_all(7)
    blocks, paths, rt = make_tree(4, [3, 2], seed=9)
    tables = tables_of(blocks, [3, 2])
    enc = make_encoder(attn_drop=0.5, double=True)
    feat, query, _ = inputs(2, tables[0].num_src, 4, "raw", False, torch.float64)
    compare(enc, tables, paths, feat, query, rt, out_rtol=1e-10, grad_rtol=1e-10)
    enc.train()
    a, mask = enc.encode_tree(tables, feat, query, rt)
    b, _ = enc.encode_tree(tables, feat, query, rt)
    assert torch.isfinite(a).all() and not torch.equal(a[mask], b[mask])


def test_autocast_bf16_close_to_float32():
    seed_all(8)
    blocks, paths, rt = make_tree(5, [3, 2], seed=10)
    tables = tables_of(blocks, [3, 2])
    enc = make_encoder(edge=True).eval()
    feat, query, ef = inputs(2, tables[0].num_src, 5, "raw", True, torch.float32)
    ref, mask = enc.encode_tree(tables, feat, query, rt, ef)
    # Activations may arrive in bf16 too (the BFS layers' outputs under autocast).
    for f, qf in ((feat, query), (feat.bfloat16(), query.bfloat16())):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out, mask16 = enc.encode_tree(tables, f, qf, rt, ef)
        assert torch.equal(mask, mask16) and torch.isfinite(out).all()
        err = (out.float() - ref).abs()[mask].max().item()
        assert err <= 0.05 * max(1.0, ref[mask].abs().max().item())


# ---------------------------------------------------------------------------- sampler
def small_graph(seed=0, num_nodes=40, num_edges=600):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, num_edges)
    dst = rng.integers(0, num_nodes, num_edges)
    ts = np.sort(rng.uniform(0, 1000, num_edges))
    return TemporalGraph(src, dst, ts), num_edges


@needs_sampler
@pytest.mark.parametrize("fanouts", [[3, 2], [2, 2, 2]], ids=lambda f: "x".join(map(str, f)))
@pytest.mark.parametrize("strategy", ["recent", "uniform"])
@pytest.mark.parametrize("within_path_agg", ["attn", "mean"])
def test_matches_forward_on_sampler_output(fanouts, strategy, within_path_agg):
    seed_all(9)
    g, num_edges = small_graph()
    rng = np.random.default_rng(1)
    B = 24
    nodes = rng.integers(0, 40, B)
    times = rng.uniform(0, 1000, B)
    times[:2] = 0.0  # before every edge: roots without any history
    sampler = TemporalSampler(g, fanouts, strategy=strategy, seed=5)
    batch = sampler.sample(nodes, times)
    L = len(fanouts)
    candidates = {"blocks": tables_of(batch.blocks, sampler.fanouts)}
    if getattr(batch, "_layers", None) is not None:  # tables from C++ (lead's change)
        candidates["layers"] = batch.layers
    enc = make_encoder(within_path_agg, edge=True).eval()
    ef = torch.randn(num_edges, EDGE_DIM, generator=torch.Generator().manual_seed(2))
    assert not batch.paths.mask.any(-1)[:2].any()
    for name, tables in candidates.items():
        assert [t.fanout for t in tables] == list(sampler.fanouts), name
        num_src = tables[0].num_src
        for feat_mode in ("none", "raw", "bfs"):
            feat, query, _ = inputs(L, num_src, B, feat_mode, False, torch.float32)
            compare(enc, tables, batch.paths, feat, query, batch.root_times, ef,
                    project=False)


@needs_sampler
def test_sampler_float64_and_aggregator():
    # Through the model's aggregator (project=False + fc2 folded in), in float64.
    seed_all(10)
    g, _ = small_graph(seed=3)
    rng = np.random.default_rng(4)
    B = 16
    sampler = TemporalSampler(g, [3, 2], strategy="uniform", seed=1)
    batch = sampler.sample(rng.integers(0, 40, B), rng.uniform(200, 1000, B))
    tables = batch.layers
    enc = make_encoder(double=True).eval()
    agg = PathAggregator(12, 12, 2).double().eval()
    feat, query, _ = inputs(2, tables[0].num_src, B, "raw", False, torch.float64)
    hbfs = torch.randn(B, 12, dtype=torch.float64)
    u_ref = enc._encode_slots(batch.paths, feat, query, batch.root_times, None, False)
    u, mask = enc._encode_tree(tables, feat, query, batch.root_times, None, False)
    ref = agg._aggregate(u_ref, hbfs, batch.paths.mask.any(-1), enc.fc2)
    out = agg._aggregate(u, hbfs, mask, enc.fc2)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)


# ------------------------------------------------------------ fused kernels vs plain ops
@pytest.mark.parametrize("heads_alpha", [2, 1])
def test_combine_large_tensor_backward_matches_small(monkeypatch, heads_alpha):
    # _Combine's backward takes batched products above a size threshold; force that path
    # on small tensors and compare with the broadcast-and-sum one and with autograd.
    from tbdfs_dgl.nn import path_encoder as pe

    seed = 11
    print("seed", seed)
    gen = torch.Generator().manual_seed(seed)
    B, n, k, H, dk = 3, 4, 5, 2, 6

    def rand(*shape):
        return torch.rand(*shape, generator=gen, dtype=torch.float64).requires_grad_()

    inputs = [rand(B, n, H, dk), rand(B, n, k, heads_alpha), rand(B, n, k, heads_alpha),
              rand(B, n, k, H, dk)]
    grad = torch.randn(B, n, k, H, dk, generator=gen, dtype=torch.float64)
    out_par, alpha, beta, v = inputs
    plain = alpha.unsqueeze(-1) * out_par.unsqueeze(2) + beta.unsqueeze(-1) * v
    want = torch.autograd.grad(plain, inputs, grad)
    for big in (1 << 40, 0):
        monkeypatch.setattr(pe, "_BIG", big)
        out = pe._Combine.apply(*inputs)
        assert torch.allclose(out, plain)
        got = torch.autograd.grad(out, inputs, grad)
        for g, w in zip(got, want):
            assert torch.allclose(g, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("p", [0.0, 0.3])
def test_add_relu_dropout_matches_plain_ops(p):
    # The fused ReLU + dropout of encode_tree's hidden layer: with its dropout mask read
    # back from the output, the same values and gradients as the plain ops.
    from tbdfs_dgl.nn.path_encoder import _add_relu_dropout_

    seed = 12
    print("seed", seed)
    torch.manual_seed(seed)
    B, n, W = 4, 50, 7
    x0 = torch.randn(B * n, W, dtype=torch.float64)
    c = torch.randn(B, 1, W, dtype=torch.float64, requires_grad=True)
    drop = torch.nn.Dropout(p).train()
    x = x0.clone().requires_grad_()
    out = _add_relu_dropout_(x * 1.0, c, drop)  # x * 1.0: a fresh non-view product
    pre = x0.view(B, n, W) + c.detach()
    kept = (out != 0) | (pre <= 0)
    if p:
        dropped = (pre > 0) & ~kept
        assert dropped.any() and kept.any()
        frac = dropped.sum().item() / (pre > 0).sum().item()
        assert abs(frac - p) < 0.15
    x_ref = x0.clone().requires_grad_()
    c_ref = c.detach().clone().requires_grad_()
    ref = torch.relu(x_ref.view(B, n, W) + c_ref) * kept / (1 - p)
    assert torch.allclose(out, ref)
    grad = torch.randn(B, n, W, dtype=torch.float64)
    out.backward(grad)
    ref.backward(grad)
    assert torch.allclose(x.grad, x_ref.grad) and torch.allclose(c.grad, c_ref.grad)
    # Eval mode: plain ReLU.
    drop.eval()
    assert torch.equal(_add_relu_dropout_(x0.clone(), c.detach(), drop),
                       torch.relu(x0.view(B, n, W) + c.detach()))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.int64])
def test_distinct_rows_of_float_and_integer_keys(dtype):
    # Floats are told apart by their bits, with -0.0 taken as 0.0: the same distinct keys
    # and inverse index as comparing the values.
    from tbdfs_dgl.nn import _distinct

    g = torch.Generator().manual_seed(3)
    key = (torch.randint(0, 40, (12, 25), generator=g) * 3 - 30).to(dtype)
    if dtype.is_floating_point:
        key = key * 0.37
        key[0, :5] = -0.0
        key[1, :5] = 0.0
    uniq, inv = _distinct.distinct_rows(key)
    assert torch.equal(uniq[inv], key.reshape(-1))
    assert uniq.numel() == torch.unique(key).numel()  # -0.0 == 0.0 for unique too
    assert torch.unique(uniq).numel() == uniq.numel()
    assert _distinct.distinct_rows(torch.arange(10, dtype=dtype)) is None  # all distinct
