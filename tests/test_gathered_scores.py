"""Scores of instances read from table rows in place (``csrc/gathered_scores.cpp`` via
``tbdfs_dgl.nn._gathered_scores``) against gathering the rows and multiplying.

No DGL here: the sanitizer run (``make sanitize``) covers this file.
"""
import numpy as np
import pytest
import torch

from tbdfs_dgl.nn import PathEncoder, _native
from tbdfs_dgl.nn import _gathered_scores as gs

torch.set_num_threads(1)

try:
    from tbdfs_dgl import TemporalGraph, TemporalSampler, _C
except Exception:  # pragma: no cover - only while the extension is not built
    _C = None
pytestmark = pytest.mark.skipif(_C is None or not hasattr(_C, "gathered_scores_forward"),
                                reason="extension not built")


def inputs(B, per_root, H, widths, seed):
    g = torch.Generator().manual_seed(seed)
    queries, tables = [], []
    for i, K in enumerate(widths):
        U = 3 + 4 * i
        queries.append(torch.randn(B, H, K, generator=g, requires_grad=True))
        tables.append((torch.randn(U, K, generator=g, requires_grad=True),
                       torch.randint(0, U, (B * per_root,), generator=g)))
    return queries, tables


def reference(queries, tables, per_root):
    out = 0
    for q, (rows, index) in zip(queries, tables):
        x = rows[index].view(q.shape[0], per_root, -1)  # [B, per_root, K]
        out = out + torch.einsum("bpk,bhk->bph", x, q)
    return out.reshape(-1, queries[0].shape[1])


@pytest.mark.parametrize("shape", [(4, 6, 2, (5,)), (1, 1, 1, (3,)), (3, 10, 2, (9, 16, 1))],
                         ids=["one_part", "one_instance", "three_parts"])
def test_kernel_equals_gather_and_multiply(shape):
    B, per_root, H, widths = shape
    queries, tables = inputs(B, per_root, H, widths, seed=B + per_root)
    out = gs.gathered_scores(queries, tables)
    ref = reference(queries, tables, per_root)
    assert out.shape == (B * per_root, H)
    assert torch.allclose(out, ref, rtol=1e-5, atol=1e-5 * ref.abs().max().item())
    weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    tensors = queries + [rows for rows, _ in tables]
    ga = torch.autograd.grad((out * weight).sum(), tensors)
    gb = torch.autograd.grad((ref * weight).sum(), tensors)
    for a, b in zip(ga, gb):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5 * max(1.0, b.abs().max().item()))


def test_gradients_only_where_wanted():
    queries, tables = inputs(2, 3, 2, (4, 4), seed=2)
    tables = [(tables[0][0].detach(), tables[0][1]), tables[1]]  # first rows: no gradient
    out = gs.gathered_scores(queries, tables)
    g_q0, g_rows1 = torch.autograd.grad(out.sum(), [queries[0], tables[1][0]])
    assert g_q0.shape == queries[0].shape and g_rows1.shape == tables[1][0].shape


def test_no_roots():  # an empty batch has no scores, not an error
    queries, tables = inputs(0, 5, 2, (4,), seed=1)
    out = gs.gathered_scores(queries, tables)
    assert out.shape == (0, 2)
    (g,) = torch.autograd.grad(out.sum(), [tables[0][0]])
    assert torch.equal(g, torch.zeros_like(g))


def test_same_bits_whatever_the_thread_count():
    queries, tables = inputs(70, 8, 2, (12, 7), seed=4)
    tensors = queries + [rows for rows, _ in tables]
    results = []
    before = torch.get_num_threads()
    try:
        for threads in (1, 3):
            torch.set_num_threads(threads)
            out = gs.gathered_scores(queries, tables)
            results.append([out.detach()] + list(torch.autograd.grad(out.sum(), tensors)))
    finally:
        torch.set_num_threads(before)
    for a, b in zip(*results):
        assert torch.equal(a, b)


def test_bad_input_is_a_clear_error():
    B, H, K, U, N = 2, 2, 3, 4, 6
    f = np.float32
    q, rows, index = np.zeros((B, H, K), f), np.zeros((U, K), f), np.zeros(N, np.int64)
    scores = np.zeros((N, H), f)
    _C.gathered_scores_forward([q], [rows], [index], scores)
    bad = index.copy()
    bad[2] = U
    with pytest.raises(ValueError, match="outside the 4 rows"):
        _C.gathered_scores_forward([q], [rows], [bad], scores)
    with pytest.raises(ValueError, match="query must have shape"):
        _C.gathered_scores_forward([q[:, :, :2]], [rows], [index], scores)
    with pytest.raises(ValueError, match="B dividing the instances"):
        _C.gathered_scores_forward([np.zeros((4, H, K), f)], [rows], [index], scores)
    with pytest.raises(ValueError, match="at least one part"):
        _C.gathered_scores_forward([], [], [], scores)
    with pytest.raises(ValueError, match="pair up"):
        _C.gathered_scores_forward([q], [rows, rows], [index], scores)
    read_only = scores.copy()
    read_only.setflags(write=False)
    with pytest.raises(ValueError, match="writeable"):
        _C.gathered_scores_forward([q], [rows], [index], read_only)


@pytest.mark.parametrize("fanouts", [[4], [3, 4]], ids=["L1", "L2"])
@pytest.mark.parametrize("node_rows", [False, True], ids=["no_nodes", "node_rows"])
def test_encoder_with_and_without_the_kernel(monkeypatch, fanouts, node_rows):
    # The path encoder reads the leaves' table rows in place for the scores (no gathered
    # inputs) where the kernel runs; switched off it gathers and multiplies as before.
    from tbdfs_dgl.nn import NodeRows, TimeEncoder, _distinct

    monkeypatch.setattr(_distinct, "MAX_SHARE", 1.0)
    rng = np.random.default_rng(3)
    E, N = 400, 30
    ts = np.sort(rng.integers(0, 60, E)).astype(np.float64)
    g = TemporalGraph(rng.integers(0, N, E), rng.integers(0, N, E), ts, num_nodes=N)
    batch = TemporalSampler(g, fanouts=fanouts, strategy="uniform", seed=3).sample(
        rng.integers(0, N, 12), rng.integers(20, 61, 12).astype(np.float64), paths=False)
    D = 6 if node_rows else 0
    torch.manual_seed(0)
    enc = PathEncoder(D, 32, 2, edge_dim=32, time_encoder=TimeEncoder(32), feat_drop=0.3,
                      attn_drop=0.2)
    gen = torch.Generator().manual_seed(1)
    edge_feat = torch.randn(E, 32, generator=gen)
    table = torch.randn(N, D, generator=gen)
    nids = torch.as_tensor(batch.layers[0].src_nodes)
    feat = NodeRows(table, nids) if node_rows else None
    query = table[nids[:batch.num_roots]]
    calls = []
    real = gs.gathered_scores
    monkeypatch.setattr(gs, "gathered_scores", lambda *a: calls.append(1) or real(*a))
    runs = []
    for off in (False, True):
        calls.clear()
        torch.manual_seed(7)
        if off:
            with _native.disabled("gathered_scores_forward"):
                out, valid = enc.encode_tree(batch.layers, feat, query, batch.root_times,
                                             edge_feat)
        else:
            out, valid = enc.encode_tree(batch.layers, feat, query, batch.root_times,
                                         edge_feat)
        assert bool(calls) != off  # one call per hop with the kernel, none without
        w = torch.randn(out.shape, generator=torch.Generator().manual_seed(2))
        params = list(enc.parameters())
        grads = torch.autograd.grad((out * w * valid.unsqueeze(-1)).sum(), params,
                                    allow_unused=True)
        runs.append((out * valid.unsqueeze(-1),
                     [torch.zeros_like(p) if x is None else x for x, p in zip(grads, params)]))
    (a, ga), (b, gb) = runs
    assert torch.allclose(a, b, rtol=1e-5, atol=1e-5 * b.abs().max().item())
    for x, y in zip(ga, gb):
        assert torch.allclose(x, y, rtol=1e-4, atol=1e-5 * max(1.0, y.abs().max().item()))
