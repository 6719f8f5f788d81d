"""Tests of TBDFSModel on hand-built batches and, when the sampler is built, on sampled ones."""

import dgl
import numpy as np
import pytest
import torch

from tbdfs_dgl.batch import PathBatch, TemporalBatch
from tbdfs_dgl.model import TBDFSModel
from tbdfs_dgl.nn import PathAggregator, PathEncoder

torch.set_num_threads(1)

try:  # the compiled sampler is optional for these tests
    from tbdfs_dgl import TemporalGraph, TemporalSampler
except Exception:  # pragma: no cover - only while the extension is not built
    TemporalGraph = TemporalSampler = None
needs_sampler = pytest.mark.skipif(TemporalSampler is None, reason="sampler not importable")

NODE_DIM, EDGE_DIM, NUM_NODES, NUM_EDGES = 5, 4, 30, 80


def make_batch(num_roots, fanouts, seed=0, p_neighbour=0.7, num_nodes=NUM_NODES,
               num_edges=NUM_EDGES, empty_roots=()):
    """A valid TemporalBatch built by hand, laid out like the sampler's.

    Layer h (from the roots out) has all earlier instances as destinations, each with up to
    ``fanouts[L-1-h]`` new neighbour instances (fewer, even none, at random; none for the
    roots in ``empty_roots``) appended as sources; blocks are returned in DGL order and paths
    are the root-to-leaf chains.
    """
    rng = np.random.default_rng(seed)
    L = len(fanouts)
    nid = list(rng.integers(0, num_nodes, num_roots))
    ts = list(rng.uniform(50, 100, num_roots))
    children = {}  # (layer, instance) -> [(child instance, edge id)]
    edge_of = {}  # instance -> (edge id, time)
    blocks = []
    for h in range(L):
        k = fanouts[L - 1 - h]
        num_dst = len(nid)
        src, dst, eid, dt = [], [], [], []
        for d in range(num_dst):
            n = 0 if (h == 0 and d in empty_roots) else int(rng.binomial(k, p_neighbour))
            kids = []
            for _ in range(n):
                e = int(rng.integers(0, num_edges))
                t_e = ts[d] - rng.uniform(0.5, 20.0)
                child = len(nid)
                nid.append(int(rng.integers(0, num_nodes)))
                ts.append(t_e)
                src.append(child), dst.append(d), eid.append(e), dt.append(ts[d] - t_e)
                kids.append(child)
                edge_of[child] = (e, t_e)
            children[(h, d)] = kids
        block = dgl.create_block((torch.tensor(src, dtype=torch.int64),
                                  torch.tensor(dst, dtype=torch.int64)),
                                 num_src_nodes=len(nid), num_dst_nodes=num_dst)
        block.srcdata[dgl.NID] = torch.tensor(nid, dtype=torch.int64)
        block.srcdata["ts"] = torch.tensor(ts, dtype=torch.float64)
        block.dstdata[dgl.NID] = torch.tensor(nid[:num_dst], dtype=torch.int64)
        block.dstdata["ts"] = torch.tensor(ts[:num_dst], dtype=torch.float64)
        block.edata[dgl.EID] = torch.tensor(eid, dtype=torch.int64)
        block.edata["dt"] = torch.tensor(dt, dtype=torch.float64)
        blocks.append(block)
    blocks.reverse()

    P = int(np.prod(fanouts))
    strides = [int(np.prod(fanouts[: L - 1 - h])) for h in range(L)]  # slot stride per hop
    nodes = torch.full((num_roots, P, L), -1, dtype=torch.int64)
    eids, src_index = nodes.clone(), nodes.clone()
    pts = torch.full((num_roots, P, L), -1.0, dtype=torch.float64)

    def write(b, slot, chain):
        for h, inst in enumerate(chain):
            nodes[b, slot, h], src_index[b, slot, h] = nid[inst], inst
            eids[b, slot, h], pts[b, slot, h] = edge_of[inst]

    # Each root-to-leaf chain fills one slot whole (as csrc/paths.cpp does); a chain that
    # ends early sits in the slot whose remaining digits are zero.
    def walk(b, inst, h, slot, chain):
        kids = children.get((h, inst), []) if h < L else []
        if not kids:
            if chain:  # a root without history has no path at all
                write(b, slot, chain)
            return
        for pos, child in enumerate(kids):
            walk(b, child, h + 1, slot + pos * strides[h], chain + [child])

    for b in range(num_roots):
        walk(b, b, 0, 0, [])
    paths = PathBatch(nodes=nodes, eids=eids, ts=pts, mask=src_index >= 0,
                      src_index=src_index)
    return TemporalBatch(root_nodes=torch.tensor(nid[:num_roots], dtype=torch.int64),
                         root_times=torch.tensor(ts[:num_roots], dtype=torch.float64),
                         blocks=blocks, paths=paths)


def features(seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(NUM_NODES, NODE_DIM, generator=g),
            torch.randn(NUM_EDGES, EDGE_DIM, generator=g))


def small_model(**kw):
    args = dict(node_dim=NODE_DIM, edge_dim=EDGE_DIM, time_dim=8, hidden_dim=12,
                num_heads=2, dropout=0.0)
    args.update(kw)
    torch.manual_seed(0)
    return TBDFSModel(**args)


def permute_paths(paths, seed=0):
    g = torch.Generator().manual_seed(seed)
    B, P, _ = paths.mask.shape
    perm = torch.stack([torch.randperm(P, generator=g) for _ in range(B)])  # per root
    idx = perm.unsqueeze(-1).expand_as(paths.mask)
    return PathBatch(*(t.gather(1, idx) for t in
                       (paths.nodes, paths.eids, paths.ts, paths.mask, paths.src_index)))


# ---------------------------------------------------------------------------- tests
def test_hand_batch_is_consistent():
    batch = make_batch(4, [3, 2], seed=1)
    b0, b1 = batch.blocks
    assert b1.num_dst_nodes() == 4 and b0.num_dst_nodes() == b1.num_src_nodes()
    m = batch.paths.mask
    idx = batch.paths.src_index[m]
    assert torch.equal(b0.srcdata[dgl.NID][idx], batch.paths.nodes[m])
    assert torch.equal(b0.srcdata["ts"][idx], batch.paths.ts[m])


@pytest.mark.parametrize("kw", [
    {},
    {"path_inputs": "bfs"},
    {"within_path_agg": "mean", "across_paths_agg": "mean"},
    {"alpha": "learn"},
    {"use_time": False},
    {"alpha": 0.0},
    {"num_layers": 1},
    {"num_layers": 3},
])
def test_forward_variants_shapes_and_finiteness(kw):
    L = kw.get("num_layers", 2)
    batch = make_batch(5, [3, 2, 2][:L], seed=2)
    nf, ef = features()
    model = small_model(**kw)
    out = model(batch, nf, ef)
    assert out.shape == (5, 12) and torch.isfinite(out).all()
    logits = model.score(out, out.flip(0))
    assert logits.shape == (5,) and torch.isfinite(logits).all()
    assert model.time_rule == ("strict" if kw.get("use_time", True) else "inclusive")


def test_featureless_and_node_embedding():
    batch = make_batch(4, [3, 2], seed=3)
    model = small_model(node_dim=0, edge_dim=0)
    out = model(batch)
    assert out.shape == (4, 12) and torch.isfinite(out).all()
    emb = small_model(node_dim=0, edge_dim=EDGE_DIM, num_nodes=NUM_NODES,
                      node_embedding_dim=6)
    out = emb(batch, None, features()[1])
    out.sum().backward()
    assert emb.node_embedding.weight.grad.abs().sum() > 0


def test_feature_tables_in_float64():
    batch = make_batch(4, [3, 2], seed=11)
    nf, ef = features()
    model = small_model().eval()
    out = model(batch, nf, ef)
    assert torch.allclose(model(batch, nf.double(), ef.double()), out, atol=1e-6)


@pytest.mark.parametrize("alpha,path_inputs", [(0.3, "raw"), ("learn", "bfs")])
def test_gradients_reach_every_parameter(alpha, path_inputs):
    batch = make_batch(6, [3, 2], seed=4, p_neighbour=0.9)
    nf, ef = features()
    model = small_model(alpha=alpha, path_inputs=path_inputs, num_nodes=NUM_NODES,
                        node_embedding_dim=3)
    out = model(batch, nf, ef)
    model.score(out, out.roll(1, 0)).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_alpha_one_is_tgat_and_never_runs_dfs(monkeypatch):
    batch = make_batch(5, [3, 2], seed=5)
    nf, ef = features()
    full = small_model(alpha=0.5).eval()
    tgat = small_model(alpha=1.0).eval()
    assert tgat.path_encoder is None and tgat.path_aggregator is None
    # Same BFS weights (the DFS-free model is a subset of the parameters).
    missing, _ = tgat.load_state_dict(full.state_dict(), strict=False)
    assert not missing

    def boom(*args, **kwargs):
        raise AssertionError("DFS module called with alpha=1")

    monkeypatch.setattr(PathEncoder, "forward", boom)
    monkeypatch.setattr(PathAggregator, "forward", boom)
    out = tgat(batch, nf, ef)
    # A pure BFS stack of the same layers.
    h = tgat.node_proj(nf[batch.blocks[0].srcdata[dgl.NID]])
    for layer, block in zip(tgat.layers, batch.blocks):
        h = layer(block, h, ef[block.edata[dgl.EID]])
    assert torch.allclose(out, h, atol=1e-6)
    assert torch.allclose(out, full.bfs(batch, nf, ef)[-1], atol=1e-6)
    assert sum(p.numel() for p in tgat.parameters()) < sum(
        p.numel() for p in full.parameters())


def test_alpha_zero_is_dfs_only():
    batch = make_batch(5, [3, 2], seed=6)
    nf, ef = features()
    model = small_model(alpha=0.0).eval()
    hs = model.bfs(batch, nf, ef)
    h_dfs, has_path = model.dfs(batch, hs, ef)
    out = model(batch, nf, ef)
    assert torch.allclose(out, torch.where(has_path, h_dfs, hs[-1]), atol=1e-6)


@pytest.mark.parametrize("kw", [{}, {"path_inputs": "bfs", "across_paths_agg": "mean"},
                                {"within_path_agg": "mean", "alpha": "learn"}])
def test_permuting_paths_within_roots_changes_nothing(kw):
    batch = make_batch(5, [3, 3], seed=7)
    nf, ef = features()
    model = small_model(**kw).eval()
    out = model(batch, nf, ef)
    permuted = TemporalBatch(batch.root_nodes, batch.root_times, batch.blocks,
                             permute_paths(batch.paths))
    assert torch.allclose(model(permuted, nf, ef), out, atol=1e-5)


@pytest.mark.parametrize("path_inputs", ["raw", "bfs"])
def test_masked_slots_do_not_matter(path_inputs):
    batch = make_batch(5, [3, 2], seed=8, p_neighbour=0.5)
    nf, ef = features()
    model = small_model(path_inputs=path_inputs).eval()
    out = model(batch, nf, ef)
    p, m = batch.paths, batch.paths.mask
    assert not m.all()
    n0 = batch.blocks[0].num_src_nodes()
    g = torch.Generator().manual_seed(0)
    junk = PathBatch(
        nodes=torch.where(m, p.nodes, torch.randint(0, NUM_NODES, m.shape, generator=g)),
        eids=torch.where(m, p.eids, torch.randint(0, NUM_EDGES, m.shape, generator=g)),
        ts=torch.where(m, p.ts, torch.rand(m.shape, generator=g, dtype=torch.float64) * 1e6),
        mask=m,
        src_index=torch.where(m, p.src_index, torch.randint(0, n0, m.shape, generator=g)))
    out2 = model(TemporalBatch(batch.root_nodes, batch.root_times, batch.blocks, junk),
                 nf, ef)
    assert torch.allclose(out2, out, atol=1e-6)


def test_roots_without_history_and_batch_of_one():
    nf, ef = features()
    for kw in ({}, {"alpha": 0.0}, {"alpha": "learn", "across_paths_agg": "mean"}):
        model = small_model(**kw).eval()
        empty = make_batch(3, [3, 2], seed=9, p_neighbour=0.0)
        assert empty.blocks[-1].num_edges() == 0 and not empty.paths.mask.any()
        out = model(empty, nf, ef)
        assert torch.isfinite(out).all()
        one = make_batch(1, [3, 2], seed=10)
        out1 = model(one, nf, ef)
        assert out1.shape == (1, 12) and torch.isfinite(out1).all()
    # Training mode too (dropout on), with gradients.
    model = small_model(dropout=0.5)
    out = model(make_batch(1, [3, 2], seed=9, p_neighbour=0.0), nf, ef)
    out.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_default_bfs_form_is_dyglibs_attention_without_its_residual():
    kw = dict(node_dim=0, edge_dim=0, time_dim=8, hidden_dim=12, num_heads=2)
    m = TBDFSModel(**kw)
    assert (m.attn_norm, m.attn_dim, m.attn_init) == (True, 20, "torch")
    assert m.layers[0].fc_o is not None and m.layers[0].attn_dim == 20
    # An odd time width rounds the width up to a multiple of the heads.
    assert TBDFSModel(**dict(kw, time_dim=7, num_heads=4)).attn_dim == 20
    # Without time there is no time part to add; TGAT's form keeps TGAT's width and init.
    assert TBDFSModel(**kw, use_time=False).attn_dim == 12
    tgat = TBDFSModel(**kw, attn_norm=False)
    assert (tgat.attn_dim, tgat.attn_init, tgat.layers[0].fc_o) == (12, "xavier", None)
    # Empty neighbourhoods attend over TGAT's padding by default (round 10), in every layer.
    assert [c.empty_neighbourhood for c in TBDFSModel(**kw, num_layers=3).layers] == \
        ["padding"] * 3
    assert TBDFSModel(**kw, empty_neighbourhood="zero").layers[1].empty_neighbourhood == "zero"


def test_constructor_and_input_validation():
    good = dict(node_dim=2, edge_dim=2, time_dim=4, hidden_dim=4)
    bad = [dict(hidden_dim=5, num_heads=2), dict(time_dim=5, time_encoding="cos_sin"),
           dict(time_dim=0), dict(time_encoding="sin"),
           dict(normalize_time=True, time_encoding="cos_phase"),
           dict(node_dim=-1), dict(alpha=1.5), dict(alpha="auto"), dict(alpha=True),
           dict(within_path_agg="max"), dict(across_paths_agg="sum"), dict(path_inputs="x"),
           dict(num_layers=0), dict(dropout=1.0), dict(node_embedding_dim=3),
           dict(node_embedding_dim=3, num_nodes=0), dict(attn_dim=5, num_heads=2),
           dict(attn_dim=0), dict(attn_norm=1), dict(attn_init="normal"),
           dict(empty_neighbourhood="pad"), dict(attn_residual=True, attn_norm=False),
           dict(attn_residual=True, attn_dim=6)]
    for b in bad:
        with pytest.raises(ValueError):
            TBDFSModel(**{**good, **b})
    model = small_model()
    batch = make_batch(2, [3, 2])
    nf, ef = features()
    with pytest.raises(ValueError):
        model(batch, None, ef)
    with pytest.raises(ValueError):
        model(batch, nf, None)
    with pytest.raises(ValueError):
        model(make_batch(2, [3]), nf, ef)


# ------------------------------------------------------------------ real sampler
def random_interactions(num_nodes, num_edges, seed):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, num_edges)
    dst = rng.integers(0, num_nodes, num_edges)
    ts = np.round(rng.uniform(0, 1000, num_edges), 1)  # rounded: some equal times
    return src, dst, ts


@needs_sampler
@pytest.mark.parametrize("strategy", ["recent", "uniform"])
def test_on_sampled_batches(strategy):
    src, dst, ts = random_interactions(NUM_NODES, 400, seed=0)
    graph = TemporalGraph(src, dst, ts, num_nodes=NUM_NODES)
    sampler = TemporalSampler(graph, [4, 3], strategy=strategy, seed=1, num_threads=1)
    nf, ef = torch.randn(NUM_NODES, NODE_DIM), torch.randn(400, EDGE_DIM)
    roots = torch.arange(NUM_NODES)
    times = torch.linspace(0, 1200, NUM_NODES, dtype=torch.float64)  # incl. no history
    batch = sampler.sample(roots, times)
    for kw in ({}, {"path_inputs": "bfs", "alpha": "learn"}):
        model = small_model(**kw)
        out = model(batch, nf, ef)
        assert out.shape == (NUM_NODES, 12) and torch.isfinite(out).all()
        out.sum().backward()
    model.eval()
    permuted = TemporalBatch(batch.root_nodes, batch.root_times, batch.blocks,
                             permute_paths(batch.paths))
    assert torch.allclose(model(permuted, nf, ef), model(batch, nf, ef), atol=1e-5)


@needs_sampler
@pytest.mark.parametrize("kw", [{}, {"path_inputs": "bfs", "alpha": "learn"}])
def test_no_leakage_from_the_future(kw):
    """Interactions at times >= t (added or changed) leave every embedding at t unchanged."""
    num_edges, t = 500, 600.0
    src, dst, ts = random_interactions(NUM_NODES, num_edges, seed=1)
    ts[:20] = t  # interactions exactly at the query time are future too (strict rule)
    rng = np.random.default_rng(2)
    nf = torch.randn(NUM_NODES, NODE_DIM)
    ef = torch.randn(num_edges, EDGE_DIM, generator=torch.Generator().manual_seed(3))
    roots = torch.arange(NUM_NODES)
    times = torch.full((NUM_NODES,), t, dtype=torch.float64)
    model = small_model(**kw).eval()
    assert model.time_rule == "strict"

    def embed(s, d, tt, e):
        graph = TemporalGraph(s, d, tt, num_nodes=NUM_NODES)
        sampler = TemporalSampler(graph, [5, 4], strategy="recent",
                                  time_rule=model.time_rule, seed=0, num_threads=1)
        with torch.no_grad():
            return model(sampler.sample(roots, times), nf, e)

    base = embed(src, dst, ts, ef)
    # Future interactions: new rows appended (past edge ids unchanged), and the endpoints
    # and features of existing future rows changed.
    extra = 200
    src2 = np.concatenate([src, rng.integers(0, NUM_NODES, extra)])
    dst2 = np.concatenate([dst, rng.integers(0, NUM_NODES, extra)])
    ts2 = np.concatenate([ts, t + rng.uniform(0, 300, extra).round(0)])
    future = ts2 >= t
    src2[future[:num_edges].nonzero()[0]] = rng.integers(0, NUM_NODES, future[:num_edges].sum())
    ef2 = torch.cat([ef, torch.randn(extra, EDGE_DIM)])
    ef2[torch.from_numpy(future)] = torch.randn(int(future.sum()), EDGE_DIM) * 10
    assert torch.equal(embed(src2, dst2, ts2, ef2), base)
    # Sanity: a past interaction does change something.
    ef3 = ef.clone()
    ef3[torch.from_numpy(ts < t)] += 1.0
    assert not torch.allclose(embed(src, dst, ts, ef3), base)


def test_seed_everything_makes_initialisation_repeatable():
    import random

    from tbdfs_dgl import seed_everything

    def draw():
        model = TBDFSModel(node_dim=NODE_DIM, edge_dim=EDGE_DIM, time_dim=8, hidden_dim=12)
        return ([p.detach().clone() for p in model.parameters()],
                random.random(), np.random.rand())

    seed_everything(7)
    a = draw()
    seed_everything(7)
    b = draw()
    assert all(torch.equal(x, y) for x, y in zip(a[0], b[0])) and a[1:] == b[1:]
    seed_everything(8)
    c = draw()
    assert not all(torch.equal(x, y) for x, y in zip(a[0], c[0]))
    assert a[1] != c[1] and a[2] != c[2]
    for bad in (-1, 1.5, "3", True):
        with pytest.raises(ValueError, match="seed"):
            seed_everything(bad)


def test_padding_node_embeds_the_padding_node_recursively():
    """empty_neighbourhood='padding_node': as in TGAT's and DyGLib's recursion, the second
    layer's padding slots carry the first layer's output for the padding node (time 0, no
    history), where 'padding' leaves them zero."""
    from tbdfs_dgl import TemporalGraph, TemporalSampler

    torch.manual_seed(0)
    model = TBDFSModel(0, 0, 8, 12, alpha=1.0, dropout=0.0,
                       empty_neighbourhood="padding_node").eval()
    plain = TBDFSModel(0, 0, 8, 12, alpha=1.0, dropout=0.0, empty_neighbourhood="padding")
    plain.load_state_dict(model.state_dict())  # the option adds no parameter
    g = TemporalGraph(np.array([0, 1, 2]), np.array([1, 2, 0]), np.array([10.0, 20.0, 30.0]),
                      num_nodes=4)
    # Root 0: node 3 never interacts (no history); root 1: node 1 at time 25 has some.
    batch = TemporalSampler(g, [2, 2], seed=0, num_threads=1).sample(
        np.array([3, 1]), np.array([40.0, 25.0]))
    out, out_plain = model(batch), plain(batch).detach()
    first, second = model.layers

    def alone(t: float):
        block = dgl.create_block((torch.tensor([], dtype=torch.int64),
                                  torch.tensor([], dtype=torch.int64)),
                                 num_src_nodes=1, num_dst_nodes=1)
        block.edata["dt"] = torch.zeros(0, dtype=torch.float64)
        block.dstdata["ts"] = torch.tensor([t], dtype=torch.float64)
        return block

    with torch.no_grad():
        h1 = first(alone(40.0), None)  # the root's own first-layer instance, also empty
        pad1 = first.padding_output()
        expected = second(alone(40.0), h1, padding_feat=pad1)
        assert torch.allclose(out[0:1], expected, atol=1e-6)
        assert torch.allclose(out_plain[0:1], second(alone(40.0), h1), atol=1e-6)
    assert (out[0] - out_plain[0]).abs().max() > 1e-4
    # Root 1 has history in the second layer: only first-layer padding (zero input in both
    # forms) reaches it.
    assert torch.allclose(out[1], out_plain[1], atol=1e-6)
