"""The fused last hop of the path encoder (``csrc/leaf_merge.cpp`` via
``tbdfs_dgl.nn._leaf_merge``) against the computation it replaces.

No DGL here: the sanitizer run (``make sanitize``) covers this file.
"""
import numpy as np
import pytest
import torch

from tbdfs_dgl.nn import PathEncoder, _native
from tbdfs_dgl.nn import _leaf_merge as lm

torch.set_num_threads(1)

try:
    from tbdfs_dgl import TemporalGraph, TemporalSampler, _C
except Exception:  # pragma: no cover - only while the extension is not built
    _C = None
needs_kernel = pytest.mark.skipif(_C is None or not hasattr(_C, "leaf_merge_forward"),
                                  reason="extension not built")
pytestmark = needs_kernel


def reference(root, states, alpha, beta, parts, weight, keep, scale):
    """The unfused computation: each leaf's attention output, then fc1, ReLU, dropout."""
    B, n, H, d = states.shape
    k = alpha.shape[2]
    N = B * n * k
    value = sum((rows[index] for rows, index in parts),
                states.new_zeros(N, H * d)).view(B, n, k, H, d)
    a = (alpha.expand(B, n, k, H).unsqueeze(-1) * states.unsqueeze(2)
         + beta.expand(B, n, k, H).unsqueeze(-1) * value)
    x = root.view(B, 1, -1) + a.reshape(B, n * k, H * d) @ weight.T
    out = torch.relu(x)
    if keep is not None:
        out = out * keep.view(B, n * k, -1) * scale
    return out


def inputs(B, n, k, H, d, W, num_parts, seed, heads_shared=False):
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g, requires_grad=True)

    Hw = 1 if heads_shared else H
    alpha = torch.rand(B, n, k, Hw, generator=g).requires_grad_()
    beta = torch.rand(B, n, k, Hw, generator=g)
    beta[..., 0, :] = 0.0  # some absent leaves: their value does not count
    beta.requires_grad_()
    parts = []
    for i in range(num_parts):
        U = 2 + 3 * i
        parts.append((r(U, H * d), torch.randint(0, U, (B * n * k,), generator=g)))
    return r(B, W), r(B, n, H, d), alpha, beta, parts, r(W, H * d)


def grads(out, tensors, seed):
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed + 1))
    return torch.autograd.grad((out * w).sum(), tensors)


@pytest.mark.parametrize("shape", [(3, 4, 3, 2, 5, 7), (1, 1, 1, 1, 3, 4), (2, 3, 5, 2, 8, 16)],
                         ids=["3x4x3_h2", "one_leaf", "wide"])
@pytest.mark.parametrize("num_parts", [0, 1, 3])
@pytest.mark.parametrize("p", [0.0, 0.4], ids=["no_dropout", "dropout"])
def test_kernel_equals_the_unfused_computation(shape, num_parts, p):
    B, n, k, H, d, W = shape
    seed = 11 * num_parts + B
    root, states, alpha, beta, parts, weight = inputs(B, n, k, H, d, W, num_parts, seed)
    drop = torch.nn.Dropout(p).train()
    tensors = [root, states, alpha, beta, weight] + [rows for rows, _ in parts]
    torch.manual_seed(seed)
    out = lm.leaf_merge(root, states, alpha, beta, parts, weight, drop)
    # the same mask as the kernel's (drawn from the same seed, as _AddReluDropout does)
    torch.manual_seed(seed)
    keep = lm.keep_mask((B * n * k, W), p) if p else None
    ref = reference(root, states, alpha, beta, parts, weight, keep, 1.0 / (1.0 - p))
    scale = ref.abs().max().item() + 1e-6
    assert out.shape == ref.shape
    assert torch.allclose(out, ref, rtol=1e-5, atol=1e-5 * scale)
    for a, b in zip(grads(out, tensors, seed), grads(ref, tensors, seed)):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5 * max(1.0, b.abs().max().item()))


@pytest.mark.parametrize("c", [6, 40], ids=["composed", "two_stage"])
def test_raw_rows_with_their_value_map(c):
    # A part given as raw rows and its value map gives the value rows' result: the maps
    # composed first where that costs no more (c = 6 here), or applied in turn (c = 40,
    # H = 2, d = 5, W = 7: c·W > d·(c + W)); gradients reach the raw rows and the map.
    B, n, k, H, d, W = 3, 2, 4, 2, 5, 7
    root, states, alpha, beta, parts, weight = inputs(B, n, k, H, d, W, 1, seed=31)
    g = torch.Generator().manual_seed(32)
    raw = torch.randn(9, c, generator=g, requires_grad=True)
    value_map = torch.randn(H * d, c, generator=g, requires_grad=True)
    index = torch.randint(0, 9, (B * n * k,), generator=g)
    drop = torch.nn.Dropout(0.0)
    tensors = [root, states, alpha, beta, weight, raw, value_map]
    out = lm.leaf_merge(root, states, alpha, beta, parts + [(raw, index, value_map)], weight,
                        drop)
    ref = lm.leaf_merge(root, states, alpha, beta, parts + [(raw @ value_map.T, index)],
                        weight, drop)
    assert torch.allclose(out, ref, rtol=1e-5, atol=1e-5 * ref.abs().max().item())
    for a, b in zip(grads(out, tensors, 33), grads(ref, tensors, 33)):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5 * max(1.0, b.abs().max().item()))


def test_nan_propagates_as_in_torch():
    # A NaN pre-activation stays NaN through the ReLU (and a dropped one too, NaN * 0),
    # as in torch: a diverging model is not hidden by the kernel.
    root, states, alpha, beta, parts, weight = inputs(2, 2, 3, 2, 4, 6, 1, 9)
    with torch.no_grad():
        root[1, 2] = float("nan")
    for p in (0.0, 0.5):
        torch.manual_seed(0)
        out = lm.leaf_merge(root, states, alpha, beta, parts, weight,
                            torch.nn.Dropout(p).train())
        torch.manual_seed(0)
        keep = lm.keep_mask((12, 6), p) if p else None
        ref = reference(root, states, alpha, beta, parts, weight, keep, 1.0 / (1.0 - p))
        assert torch.equal(torch.isnan(out), torch.isnan(ref)) and torch.isnan(out).any()


def test_heads_sharing_one_weight():  # within_path_agg='mean': [B, n, k, 1] weights
    root, states, alpha, beta, parts, weight = inputs(2, 3, 2, 2, 4, 6, 2, 5,
                                                      heads_shared=True)
    drop = torch.nn.Dropout(0.0)
    out = lm.leaf_merge(root, states, alpha, beta, parts, weight, drop)
    ref = reference(root, states, alpha, beta, parts, weight, None, 1.0)
    assert torch.allclose(out, ref, rtol=1e-5, atol=1e-5 * ref.abs().max().item())
    tensors = [alpha, beta, states]
    for a, b in zip(grads(out, tensors, 5), grads(ref, tensors, 5)):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5 * max(1.0, b.abs().max().item()))


def test_same_bits_whatever_the_thread_count():
    # Per-root and per-parent sums stay within one chunk, the rows' sums run leaf by leaf:
    # the results do not depend on how the roots are split among threads.
    root, states, alpha, beta, parts, weight = inputs(70, 3, 4, 2, 6, 12, 2, 3)
    tensors = [root, states, alpha, beta] + [rows for rows, _ in parts]
    results = []
    before = torch.get_num_threads()
    try:
        for threads in (1, 3):
            torch.set_num_threads(threads)
            out = lm.leaf_merge(root, states, alpha, beta, parts, weight, torch.nn.Dropout(0))
            results.append([out.detach()] + list(grads(out, tensors, 3)))
    finally:
        torch.set_num_threads(before)
    for a, b in zip(*results):
        assert torch.equal(a, b)


def test_bad_input_is_a_clear_error():
    B, n, k, H, W, U = 2, 2, 3, 2, 4, 5
    N = B * n * k
    f = np.float32
    root, parent = np.zeros((B, W), f), np.zeros((B * n, H, W), f)
    ab, out = np.zeros((N, H), f), np.zeros((N, W), f)
    rows, index = np.zeros((U, H, W), f), np.zeros(N, np.int64)
    _C.leaf_merge_forward(root, parent, ab, ab, [rows], [index], None, 1.0, k, out)
    bad_index = index.copy()
    bad_index[3] = U
    with pytest.raises(ValueError, match="index.*outside the 5 rows"):
        _C.leaf_merge_forward(root, parent, ab, ab, [rows], [bad_index], None, 1.0, k, out)
    bad_index[3] = -1
    with pytest.raises(ValueError, match="index"):
        _C.leaf_merge_forward(root, parent, ab, ab, [rows], [bad_index], None, 1.0, k, out)
    with pytest.raises(ValueError, match="alpha must have shape"):
        _C.leaf_merge_forward(root, parent, ab[1:], ab, [rows], [index], None, 1.0, k, out)
    with pytest.raises(ValueError, match="rows\\[0\\] must be"):
        _C.leaf_merge_forward(root, parent, ab, ab, [rows[:, :1]], [index], None, 1.0, k, out)
    with pytest.raises(ValueError, match="whole number of rows per root"):
        _C.leaf_merge_forward(np.zeros((3, W), f), parent, ab, ab, [], [], None, 1.0, k, out)
    with pytest.raises(ValueError, match="keep must be in"):
        _C.leaf_merge_forward(root, parent, ab, ab, [rows], [index], 7, 0.0, k, out)
    with pytest.raises(ValueError, match="k must be"):
        _C.leaf_merge_forward(root, parent, ab, ab, [rows], [index], None, 1.0, 0, out)
    read_only = out.copy()
    read_only.setflags(write=False)
    with pytest.raises(ValueError, match="writeable"):
        _C.leaf_merge_forward(root, parent, ab, ab, [rows], [index], None, 1.0, k, read_only)
    with pytest.raises(TypeError):  # float64 is not converted behind the caller's back
        _C.leaf_merge_forward(root.astype(np.float64), parent, ab, ab, [rows], [index], None,
                              1.0, k, out)


# ------------------------------------------------------------------ in the path encoder
def _tree(fanouts, seed, whole_times=True):
    """Layer tables of a sampled batch on a small random graph; whole-unit times make
    gaps repeat, so every leaf input part comes as distinct rows."""
    rng = np.random.default_rng(seed)
    E, N = 400, 30
    src, dst = rng.integers(0, N, E), rng.integers(0, N, E)
    ts = np.sort(rng.integers(0, 60, E)).astype(np.float64)
    if not whole_times:
        ts = ts + rng.uniform(0, 1, E)
    g = TemporalGraph(src, dst, ts, num_nodes=N)
    sampler = TemporalSampler(g, fanouts=fanouts, strategy="uniform", seed=seed)
    roots = rng.integers(0, N, 12)
    times = rng.integers(20, 61, 12).astype(np.float64)
    batch = sampler.sample(roots, times, paths=False)
    return batch, E, N


def _encode(enc, batch, feat, edge_feat, query, seed):
    torch.manual_seed(seed)
    out, valid = enc.encode_tree(batch.layers, feat, query, batch.root_times, edge_feat)
    weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed))
    params = [p for p in enc.parameters() if p.requires_grad]
    gs = torch.autograd.grad((out * weight * valid.unsqueeze(-1)).sum(), params,
                             allow_unused=True)
    return out, valid, [torch.zeros_like(p) if x is None else x for x, p in zip(gs, params)]


@pytest.mark.parametrize("fanouts", [[4], [3, 4], [2, 2, 3]], ids=["L1", "L2", "L3"])
@pytest.mark.parametrize("agg", ["attn", "mean"])
@pytest.mark.parametrize("node_rows", [False, True], ids=["no_nodes", "node_rows"])
def test_encoder_fused_equals_unfused(monkeypatch, fanouts, agg, node_rows):
    from tbdfs_dgl.nn import NodeRows, TimeEncoder, _distinct

    # Parts as distinct rows whatever their share of repeats (the fused path needs them).
    monkeypatch.setattr(_distinct, "MAX_SHARE", 1.0)
    batch, E, N = _tree(fanouts, seed=len(fanouts))
    D, Ed, T = (6 if node_rows else 0), 32, 32
    torch.manual_seed(0)
    # dropout everywhere: both paths draw the same masks from the same stream
    enc = PathEncoder(D, 32, 2, edge_dim=Ed, time_encoder=TimeEncoder(T), within_path_agg=agg,
                      feat_drop=0.3, attn_drop=0.2)
    g = torch.Generator().manual_seed(1)
    edge_feat = torch.randn(E, Ed, generator=g)
    table = torch.randn(N, D, generator=g)
    nids = torch.as_tensor(batch.layers[0].src_nodes)
    feat = NodeRows(table, nids) if node_rows else None
    query = table[nids[:batch.num_roots]] if node_rows else torch.zeros(batch.num_roots, 0)
    calls = []
    real = lm.leaf_merge

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    lm.leaf_merge = counted
    try:
        fused = _encode(enc, batch, feat, edge_feat, query, 7)
        assert calls, "the fused path did not run"
        with _native.disabled("leaf_merge_forward"):
            n = len(calls)
            unfused = _encode(enc, batch, feat, edge_feat, query, 7)
            assert len(calls) == n
    finally:
        lm.leaf_merge = real
    (a, va, ga), (b, vb, gb) = fused, unfused
    assert torch.equal(va, vb)
    m = va.unsqueeze(-1)
    assert torch.allclose(a * m, b * m, rtol=1e-5, atol=1e-5 * b.abs().max().item())
    for x, y in zip(ga, gb):
        assert torch.allclose(x, y, rtol=1e-4, atol=1e-5 * max(1.0, y.abs().max().item()))


def test_encoder_keeps_the_unfused_path_where_a_part_is_per_slot():
    # Distinct times: the gaps do not repeat enough to be encoded per distinct gap, so the
    # leaves' time part is per slot and the last hop is not fused.
    from tbdfs_dgl.nn import TimeEncoder

    batch, E, N = _tree([3, 4], seed=2, whole_times=False)
    enc = PathEncoder(0, 32, 2, time_encoder=TimeEncoder(32))
    calls = []
    real = lm.leaf_merge
    lm.leaf_merge = lambda *a, **k: calls.append(1) or real(*a, **k)
    try:
        enc.encode_tree(batch.layers, None, torch.zeros(batch.num_roots, 0), batch.root_times)
    finally:
        lm.leaf_merge = real
    assert not calls


def test_backward_after_the_kernels_are_switched_off():
    # A forward that ran the kernel keeps its backward kernel, whatever is switched off
    # between the two (benchmarks and tests toggle them).
    root, states, alpha, beta, parts, weight = inputs(2, 2, 3, 2, 4, 6, 1, 4)
    out = lm.leaf_merge(root, states, alpha, beta, parts, weight, torch.nn.Dropout(0.0))
    with _native.all_disabled():
        (g,) = torch.autograd.grad(out.sum(), [root])
    ref = reference(root, states, alpha, beta, parts, weight, None, 1.0)
    (g_ref,) = torch.autograd.grad(ref.sum(), [root])
    assert torch.allclose(g, g_ref, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ the kernel's dropout
def test_dropout_mask_rate_and_independence():
    # The counter-based draws keep each unit with probability 1 - p, rows and units alike;
    # a seed draws one mask whatever the thread count, and two seeds draw two masks.
    for p in (0.1, 0.5, 0.9):
        torch.manual_seed(1)
        mask = lm.keep_mask((4000, 101), p).float()
        n = mask.numel()
        sd = (p * (1 - p) / n) ** 0.5
        assert abs(mask.mean().item() - (1 - p)) < 6 * sd
        # per unit position the rate holds too (no lane of the 64-bit outputs is biased)
        cols = mask.mean(dim=0)
        assert (cols - (1 - p)).abs().max().item() < 6 * (p * (1 - p) / 4000) ** 0.5
        # neighbouring units and neighbouring rows are uncorrelated
        x = mask - mask.mean()
        for a, b in ((x[:, 1:], x[:, :-1]), (x[1:], x[:-1])):
            corr = (a * b).mean() / x.var()
            assert abs(corr.item()) < 0.02
    masks = []
    before = torch.get_num_threads()
    try:
        for threads in (1, 3):
            torch.set_num_threads(threads)
            torch.manual_seed(5)
            masks.append(lm.keep_mask((3000, 7), 0.3))
    finally:
        torch.set_num_threads(before)
    assert torch.equal(masks[0], masks[1])
    assert not torch.equal(lm.keep_mask((3000, 7), 0.3), masks[0])  # the next seed
    out = np.zeros((3, 5), np.uint8)
    _C.dropout_keep_mask(11, 1.0, out)
    assert out.all()  # keep 1: nothing dropped
    with pytest.raises(ValueError, match="keep must be in"):
        _C.dropout_keep_mask(11, 1.5, out)
    with pytest.raises(ValueError, match="2-D"):
        _C.dropout_keep_mask(11, 0.5, np.zeros(4, np.uint8))


def test_dropout_is_repeatable_and_drawn_by_the_kernel():
    # A seeded run draws the same units; the kernel's output is zero exactly where the
    # mask of the same seed drops a unit (or the ReLU zeroes it).
    root, states, alpha, beta, parts, weight = inputs(3, 2, 4, 2, 5, 40, 2, 6)
    drop = torch.nn.Dropout(0.5).train()
    outs = []
    for _ in range(2):
        torch.manual_seed(3)
        outs.append(lm.leaf_merge(root, states, alpha, beta, parts, weight, drop).detach())
    assert torch.equal(outs[0], outs[1])
    torch.manual_seed(3)
    keep = lm.keep_mask((3 * 2 * 4, 40), 0.5).view(3, 8, 40).bool()
    no_drop = lm.leaf_merge(root, states, alpha, beta, parts, weight,
                            torch.nn.Dropout(0.0)).detach()
    assert torch.equal(outs[0] == 0, ~keep | (no_drop == 0))
    assert torch.allclose(outs[0][keep], 2 * no_drop[keep])


def test_dropout_mask_without_the_kernels():
    # Without the extension (or with every kernel off) the unfused path draws its masks
    # with torch's bernoulli_: same dtype and shape, seeded by torch's generator.
    with _native.all_disabled():
        torch.manual_seed(4)
        a = lm.keep_mask((300, 40), 0.25)
        torch.manual_seed(4)
        b = torch.empty((300, 40), dtype=torch.uint8).bernoulli_(0.75)
    assert a.dtype == torch.uint8 and torch.equal(a, b)
    assert lm.keep_mask((0, 5), 0.5).shape == (0, 5)
