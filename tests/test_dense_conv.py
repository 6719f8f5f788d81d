"""TemporalAttentionConv on dense layer tables (torch only) against its DGL message-passing
path, which is itself checked against a loop-based reference in tests/test_nn.py."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import dgl
import numpy as np
import pytest
import torch

from tbdfs_dgl._tables import table_from_block
from tbdfs_dgl.batch import LayerTable
from tbdfs_dgl.nn import TemporalAttentionConv, TimeEncoder

torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- helpers
def seed_all(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)
    dgl.seed(seed)


def degrees(num_dst, k, gen):
    """In-degrees in ``0..k`` with at least one empty, one partial and one full row."""
    deg = torch.randint(0, k + 1, (num_dst,), generator=gen)
    deg[:3] = torch.tensor([0, 1, k])
    return deg


def sampler_block(num_dst, k, gen, dtype=torch.float64):
    """A block laid out like the sampler's: destinations first, then one new source per
    edge, edges grouped by destination (edge order = CSC order)."""
    deg = degrees(num_dst, k, gen)
    num_edges = int(deg.sum())
    dst = torch.repeat_interleave(torch.arange(num_dst), deg)
    src = num_dst + torch.arange(num_edges)
    block = dgl.create_block((src, dst), num_src_nodes=num_dst + num_edges,
                             num_dst_nodes=num_dst)
    num_src = block.num_src_nodes()
    block.srcdata[dgl.NID] = torch.randint(0, 50, (num_src,), generator=gen)
    block.srcdata["ts"] = torch.rand(num_src, generator=gen, dtype=torch.float64) * 1e3
    block.edata[dgl.EID] = torch.randperm(num_edges, generator=gen)
    # Gaps from seconds to months: the time encoding's whole frequency range matters.
    block.edata["dt"] = (10 ** (torch.rand(num_edges, generator=gen, dtype=torch.float64) * 7)
                         ).to(dtype)
    return block


def generic_block(gen):
    """A DGL block from to_block: sources shared between edges, edges not in CSC order."""
    g = dgl.rand_graph(30, 90)
    g.edata["dt"] = torch.rand(90, generator=gen, dtype=torch.float64) * 1e4
    g.ndata["ts"] = torch.rand(30, generator=gen, dtype=torch.float64)
    seeds = torch.arange(12)
    return dgl.to_block(dgl.in_subgraph(g, seeds), seeds)


def slot_edge_ids(block, table):
    """``[N_dst, k]`` block edge id of every table slot (0 where padded)."""
    indptr, _, eperm = block.adj_tensors("csc")
    col = torch.arange(table.fanout)
    pos = torch.where(table.mask, indptr[:-1].unsqueeze(1) + col, 0)
    return torch.where(table.mask, eperm[pos] if eperm.numel() else pos, 0)


def assert_close(a, b, rtol, what=""):
    """``max|a - b| <= rtol * max(1, max|b|)``: a tolerance scaled to the magnitudes."""
    a, b = a.detach().double(), b.detach().double()
    assert a.shape == b.shape, what
    assert torch.isfinite(a).all(), what
    scale = max(1.0, b.abs().max().item()) if b.numel() else 1.0
    err = (a - b).abs().max().item() if b.numel() else 0.0
    assert err <= rtol * scale, f"{what}: max|a-b| = {err:.3g}, scale {scale:.3g}"


def assert_grads_close(ga, gb, rtol, what=""):
    """``max|ga - gb| <= rtol * max|gb|`` (both zero is fine)."""
    ga, gb = ga.detach().double(), gb.detach().double()
    assert torch.isfinite(ga).all(), what
    err = (ga - gb).abs().max().item()
    assert err <= rtol * gb.abs().max().item() or err == 0.0, \
        f"{what}: max|ga-gb| = {err:.3g}, max|gb| = {gb.abs().max().item():.3g}"


def param_grads(conv):
    return {n: (p.grad.clone() if p.grad is not None else torch.zeros_like(p))
            for n, p in conv.named_parameters()}


def run_both(conv, block, table, feat, edge_feat_edges, slot_eid, dtype):
    """Forward + backward of both paths on the same inputs; returns outputs and gradients
    (parameters, node features, edge features)."""
    out_grad = None
    results = []
    for dense in (False, True):
        conv.zero_grad()
        f = None
        if feat is not None:
            f = tuple(x.detach().clone().requires_grad_() for x in feat) \
                if isinstance(feat, tuple) else feat.detach().clone().requires_grad_()
        x = (edge_feat_edges.detach().clone().requires_grad_()
             if edge_feat_edges is not None else None)
        if dense:
            x_in = x[slot_eid] if x is not None else None
            out = conv(table, f, x_in)
        else:
            out = conv(block, f, x)
        if out_grad is None:  # a fixed random cotangent exercises every output
            out_grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(7),
                                   dtype=dtype)
        (out * out_grad).sum().backward()
        fg = None
        if f is not None:
            fg = [y.grad for y in f] if isinstance(f, tuple) else [f.grad]
        results.append((out.detach(), param_grads(conv), fg, x.grad if x is not None else None))
    return results


def compare(results, rtol_out=1e-5, rtol_grad=1e-4):
    (ref, ref_g, ref_fg, ref_xg), (out, g, fg, xg) = results
    assert_close(out, ref, rtol_out, "output")
    for n in ref_g:
        assert_grads_close(g[n], ref_g[n], rtol_grad, n)
    if ref_fg is not None:
        for i, (a, b) in enumerate(zip(fg, ref_fg)):
            assert_grads_close(a if a is not None else torch.zeros_like(b), b, rtol_grad,
                               f"feat[{i}]")
    if ref_xg is not None:
        assert_grads_close(xg, ref_xg, rtol_grad, "edge_feat")


# ---------------------------------------------------------------- dense == DGL paths
@pytest.mark.parametrize("num_heads", [1, 2])
@pytest.mark.parametrize("edge_dim,give_edge_feat", [(0, False), (3, True), (3, False)])
@pytest.mark.parametrize("use_time", [True, False])
@pytest.mark.parametrize("featureless", [False, True])
def test_dense_matches_dgl_on_sampler_blocks(num_heads, edge_dim, give_edge_feat, use_time,
                                             featureless):
    seed_all(0)
    gen = torch.Generator().manual_seed(1)
    k = 5
    block = sampler_block(17, k, gen)
    table = table_from_block(block, fanout=k)
    assert table.fanout == k and not table.mask[0].any() and table.mask.sum() == block.num_edges()
    enc = TimeEncoder(8, use_time=use_time)  # shared, as in the model
    conv = TemporalAttentionConv(6, 8, num_heads=num_heads, edge_dim=edge_dim,
                                 time_encoder=enc).double()
    feat = None if featureless else torch.randn(block.num_src_nodes(), 6, dtype=torch.float64)
    x = (torch.randn(block.num_edges(), edge_dim, dtype=torch.float64)
         if give_edge_feat else None)
    compare(run_both(conv, block, table, feat, x, slot_edge_ids(block, table),
                     torch.float64))


@pytest.mark.parametrize("edge_dim", [0, 3])
@pytest.mark.parametrize("featureless", [False, True])
@pytest.mark.parametrize("residual", [False, True])
def test_dense_matches_dgl_with_normed_wide_attention(edge_dim, featureless, residual):
    seed_all(0)
    gen = torch.Generator().manual_seed(2)
    k = 5
    block = sampler_block(17, k, gen)  # destination 0 has no in-edges
    table = table_from_block(block, fanout=k)
    # The residual [h_i || Φ(0)] needs attn_dim = 6 + 8.
    conv = TemporalAttentionConv(6, 8, num_heads=2, edge_dim=edge_dim, time_dim=8,
                                 attn_dim=14, attn_norm=True, attn_residual=residual).double()
    with torch.no_grad():
        conv.attn_layer_norm.weight.uniform_(0.5, 1.5)
        conv.fc_o.bias.uniform_(-0.5, 0.5)
    feat = None if featureless else torch.randn(block.num_src_nodes(), 6, dtype=torch.float64)
    x = torch.randn(block.num_edges(), edge_dim, dtype=torch.float64) if edge_dim else None
    results = run_both(conv, block, table, feat, x, slot_edge_ids(block, table), torch.float64)
    compare(results)
    for n in ("fc_o.weight", "fc_o.bias", "attn_layer_norm.weight", "attn_layer_norm.bias"):
        assert results[1][1][n].abs().sum() > 0, n


@pytest.mark.parametrize("attn_norm,residual", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("featureless", [False, True])
def test_dense_matches_dgl_with_padded_empty_neighbourhoods(attn_norm, residual, featureless):
    """empty_neighbourhood='padding' on both paths: the table reads the destinations' times
    from src_ts, the graph from dstdata['ts'] (Unix-seconds magnitudes here)."""
    seed_all(0)
    gen = torch.Generator().manual_seed(3)
    k = 4
    block = sampler_block(15, k, gen)  # destination 0 has no in-edges
    block.srcdata["ts"] = block.srcdata["ts"] + 1.09e9
    block.dstdata["ts"] = block.srcdata["ts"][:block.num_dst_nodes()]
    table = table_from_block(block, fanout=k)
    assert not table.mask[0].any() and torch.equal(table.src_ts, block.srcdata["ts"])
    form = dict(attn_norm=attn_norm, attn_residual=residual, attn_dim=14 if residual else None)
    conv = TemporalAttentionConv(6, 8, num_heads=2, edge_dim=3, time_dim=8,
                                 empty_neighbourhood="padding", **form).double()
    feat = None if featureless else torch.randn(block.num_src_nodes(), 6, dtype=torch.float64)
    x = torch.randn(block.num_edges(), 3, dtype=torch.float64)
    results = run_both(conv, block, table, feat, x, slot_edge_ids(block, table), torch.float64)
    compare(results)
    zero = TemporalAttentionConv(6, 8, num_heads=2, edge_dim=3, time_dim=8, **form).double()
    zero.load_state_dict(conv.state_dict())
    plain = zero(table, feat, x[slot_edge_ids(block, table)])
    padded = results[1][0]
    empty = ~table.mask.any(dim=1)
    assert torch.equal(padded[~empty], plain[~empty].detach())
    assert (padded[empty] - plain[empty]).abs().max() > 1e-3
    # Eager on a CPU pads only the empty rows (index_put); compiled code and other devices
    # use torch.where over every row: the same values and gradients.
    from unittest import mock

    import tbdfs_dgl.nn.temporal_attention as ta
    with mock.patch.object(ta, "compiling", return_value=True):
        where = run_both(conv, block, table, feat, x, slot_edge_ids(block, table),
                         torch.float64)
    compare([results[1], where[1]], rtol_out=1e-12, rtol_grad=1e-10)


@pytest.mark.parametrize("featureless", [False, True])
def test_dense_matches_dgl_on_a_generic_block_and_pair_feats(featureless):
    seed_all(1)
    gen = torch.Generator().manual_seed(2)
    block = generic_block(gen)
    table = table_from_block(block, fanout=12)
    slot_eid = slot_edge_ids(block, table)
    # Sources are shared between edges here: nbr is not the sampler's num_dst + position.
    assert not torch.equal(table.nbr[table.mask],
                           torch.arange(block.num_edges()) + block.num_dst_nodes())
    conv = TemporalAttentionConv(6, 8, num_heads=2, edge_dim=3, time_dim=4).double()
    feat = None if featureless else torch.randn(block.num_src_nodes(), 6, dtype=torch.float64)
    x = torch.randn(block.num_edges(), 3, dtype=torch.float64)
    compare(run_both(conv, block, table, feat, x, slot_eid, torch.float64))
    if not featureless:  # (src, dst) features of different widths
        conv2 = TemporalAttentionConv((6, 5), 8, num_heads=2, edge_dim=3,
                                      time_dim=4).double()
        pair = (feat, torch.randn(block.num_dst_nodes(), 5, dtype=torch.float64))
        compare(run_both(conv2, block, table, pair, x, slot_eid, torch.float64))


@pytest.mark.parametrize("featureless", [False, True])
def test_dense_matches_dgl_in_float32(featureless):
    """The layer as trained (float32 parameters), on a larger sampler-like block."""
    seed_all(2)
    gen = torch.Generator().manual_seed(3)
    block = sampler_block(200, 10, gen)
    table = table_from_block(block, fanout=10)
    conv = TemporalAttentionConv(16, 16, num_heads=2, edge_dim=4, time_dim=16)
    feat = None if featureless else torch.randn(block.num_src_nodes(), 16)
    x = torch.randn(block.num_edges(), 4)
    # float32 sums in another order: both agree to ~1e-6 (measured), well within these.
    compare(run_both(conv, block, table, feat, x, slot_edge_ids(block, table), torch.float32),
            rtol_out=1e-5, rtol_grad=1e-4)


def test_pair_feats_equal_single_tensor_feats():
    seed_all(3)
    gen = torch.Generator().manual_seed(4)
    table = table_from_block(sampler_block(9, 4, gen), fanout=4)
    conv = TemporalAttentionConv(6, 8, num_heads=2, time_dim=4)
    h = torch.randn(table.num_src, 6)
    assert torch.equal(conv(table, h), conv(table, (h, h[: table.num_dst].clone())))


# ------------------------------------------------------------------ dense-only checks
def test_empty_rows_dt_default_and_padding_is_ignored():
    seed_all(4)
    gen = torch.Generator().manual_seed(5)
    block = sampler_block(11, 4, gen)
    table = table_from_block(block, fanout=6)  # wider than any row: padded everywhere
    conv = TemporalAttentionConv(6, 8, num_heads=2, edge_dim=3, time_dim=4)
    h = torch.randn(table.num_src, 6, requires_grad=True)
    x = torch.randn(table.num_dst, 6, 3)
    out = conv(table, h, x)
    assert out.shape == (11, 8) and torch.isfinite(out).all()
    assert torch.equal(conv(table, h, x, dt=table.dt), out)
    assert not torch.allclose(conv(table, h, x, dt=table.dt + 5.0)[1:], out[1:])
    # Whatever the padding holds (garbage features, non-finite gaps), nothing changes,
    # and an empty row (row 0) depends on its own features only.
    pad = ~table.mask
    x2 = torch.where(pad.unsqueeze(-1), torch.randn(x.shape) * 1e6, x)
    dt2 = torch.where(pad, torch.full_like(table.dt, float("nan")), table.dt)
    h2 = h.detach().clone()
    h2[1:] = torch.randn(table.num_src - 1, 6) * 100
    out2 = conv(table, h2, x2, dt=dt2)
    assert torch.allclose(out2[0], out[0], atol=1e-6)
    assert torch.allclose(conv(table, h, x2, dt=dt2), out, atol=1e-6)
    # Gradients are finite everywhere, also through the empty rows' masked softmax.
    out.pow(2).sum().backward()
    for n, p in conv.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), n
    assert torch.isfinite(h.grad).all()
    # Featureless: an empty row gets a_i = 0, so all empty rows have the same output.
    out0 = conv(table, None, x)
    empty = ~table.mask.any(1)
    assert empty.sum() >= 1 and torch.isfinite(out0).all()
    assert torch.allclose(out0[empty], out0[empty][:1].expand(int(empty.sum()), -1))


def test_validation_on_tables():
    seed_all(8)
    gen = torch.Generator().manual_seed(6)
    table = table_from_block(sampler_block(5, 3, gen), fanout=3)
    conv = TemporalAttentionConv(4, 8, edge_dim=3, time_dim=4)
    with pytest.raises(ValueError, match="edge_dim=3"):
        conv(table, torch.randn(table.num_src, 4), torch.randn(5, 3, 2))
    with pytest.raises(ValueError, match=r"\[N_dst, k, 3\]"):
        conv(table, torch.randn(table.num_src, 4), torch.randn(7, 3))  # per edge, not slot


def test_eval_is_deterministic_and_train_drops_attention_weights():
    seed_all(5)
    gen = torch.Generator().manual_seed(7)
    table = table_from_block(sampler_block(40, 6, gen), fanout=6)
    conv = TemporalAttentionConv(6, 8, num_heads=2, time_dim=4, attn_drop=0.5,
                                 feat_drop=0.5)
    plain = TemporalAttentionConv(6, 8, num_heads=2, time_dim=4)
    plain.load_state_dict(conv.state_dict())
    h = torch.randn(table.num_src, 6)
    conv.eval()
    out = conv(table, h)
    assert torch.equal(out, conv(table, h))
    assert torch.allclose(out, plain(table, h), atol=1e-6)

    seen = {}

    def hook(module, inputs, output):
        seen["in"], seen["out"] = inputs[0].detach(), output.detach()

    handle = conv.attn_drop.register_forward_hook(hook)
    try:
        conv.train()
        torch.manual_seed(0)
        out_train = conv(table, h)
    finally:
        handle.remove()
    w_in, w_out = seen["in"], seen["out"]
    # Dropout acts on the [N_dst, k, H] weights, per slot and head, in float32.
    assert w_in.shape == (table.num_dst, table.fanout, 2) and w_in.dtype == torch.float32
    live = w_in > 0
    dropped = live & (w_out == 0)
    assert dropped.any() and (live & (w_out != 0)).any()
    kept = live & (w_out != 0)
    assert torch.allclose(w_out[kept], 2 * w_in[kept])
    assert not torch.allclose(out_train, out)


def test_attention_softmax_runs_in_float32_under_autocast():
    seed_all(6)
    gen = torch.Generator().manual_seed(8)
    table = table_from_block(sampler_block(30, 5, gen), fanout=5)
    conv = TemporalAttentionConv(6, 8, num_heads=2, edge_dim=3, time_dim=4)
    h = torch.randn(table.num_src, 6)
    x = torch.randn(table.num_dst, 5, 3)
    ref = conv(table, h, x)
    seen = {}
    handle = conv.attn_drop.register_forward_hook(
        lambda m, i, o: seen.__setitem__("dtype", i[0].dtype))
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = conv(table, h, x)
            out_none = conv(table, None, x)
    finally:
        handle.remove()
    assert seen["dtype"] == torch.float32
    assert torch.isfinite(out).all() and torch.isfinite(out_none).all()
    assert torch.allclose(out.float(), ref, atol=0.1 * max(1.0, ref.abs().max().item()))


# torch 2.2's dynamo instantiates autograd.Function classes while tracing them.
@pytest.mark.filterwarnings("ignore:.*should not be instantiated:DeprecationWarning")
@pytest.mark.parametrize("use_time", [True, False])
def test_dense_path_compiles_without_graph_breaks(use_time):
    """No data-dependent shapes or host syncs: dynamo traces forward (and the custom
    backward it must prove traceable) in one graph, with the same values and gradients."""
    seed_all(7)
    gen = torch.Generator().manual_seed(9)
    table = table_from_block(sampler_block(20, 4, gen), fanout=4)
    conv = TemporalAttentionConv(6, 8, num_heads=2, edge_dim=3,
                                 time_encoder=TimeEncoder(4, use_time=use_time))
    if use_time:
        # TimeEncoder's own autograd.Function (a host kernel on CPU, out= writes on GPU)
        # is not what is under test: stand in the same formula in plain torch ops.
        enc = conv.time_encoder

        def phi(dt):
            phase = dt.to(torch.float64).unsqueeze(-1) * enc.weight.to(torch.float64)
            out = torch.stack([torch.cos(phase), torch.sin(phase)], -1).flatten(-2)
            return out.to(torch.float32) * (1.0 / enc.num_freqs) ** 0.5

        enc.forward = phi
    h = torch.randn(table.num_src, 6)
    x = torch.randn(table.num_dst, 4, 3)

    def f(nbr, mask, dt, h, x):
        t = LayerTable(table.src_nodes, table.src_ts, nbr, mask, dt, table.eid)
        return conv(t, h, x), conv(t, None, x)

    h.requires_grad_()
    ref = f(table.nbr, table.mask, table.dt, h, x)
    (ref[0].sum() + ref[1].pow(2).sum()).backward()
    ref_grads = [p.grad.clone() for p in conv.parameters()] + [h.grad.clone()]
    conv.zero_grad()
    h.grad = None
    torch._dynamo.reset()
    compiled = torch.compile(f, backend="eager", fullgraph=True)
    out = compiled(table.nbr, table.mask, table.dt, h, x)
    (out[0].sum() + out[1].pow(2).sum()).backward()
    for a, b in zip(out, ref):
        assert torch.allclose(a, b, atol=1e-6)
    for a, b in zip([p.grad for p in conv.parameters()] + [h.grad], ref_grads):
        assert torch.allclose(a, b, atol=1e-6)


# ------------------------------------------------------------------------ without DGL
_NO_DGL_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.modules["dgl"] = None  # any "import dgl" now raises ImportError
    import torch
    torch.set_num_threads(1)
    from tbdfs_dgl._tables import table_from_csc
    from tbdfs_dgl.nn import TemporalAttentionConv

    def build():
        g = torch.Generator().manual_seed(0)
        deg = torch.tensor([0, 3, 1, 4, 2, 0, 4])
        indptr = torch.cat([torch.zeros(1, dtype=torch.int64), deg.cumsum(0)])
        num_edges = int(deg.sum())
        num_src = len(deg) + num_edges
        table = table_from_csc(indptr, torch.arange(num_edges),
                               torch.rand(num_edges, generator=g, dtype=torch.float64) * 1e5,
                               torch.arange(num_src), torch.zeros(num_src, dtype=torch.float64),
                               fanout=4)
        torch.manual_seed(0)
        conv = TemporalAttentionConv(6, 8, num_heads=2, edge_dim=3, time_dim=4)
        h = torch.randn(num_src, 6, generator=g)
        x = torch.randn(len(deg), 4, 3, generator=g)
        out = conv(table, h, x)
        out.sum().backward()
        return out, conv(table, None, x), conv.fc_k.weight.grad

    if __name__ == "__main__":
        assert "dgl" not in {m.split(".")[0] for m in sys.modules if sys.modules[m] is not None}
        print(json.dumps([t.tolist() for t in build()]))
""")


def test_dense_path_runs_without_dgl(tmp_path):
    seed_all(9)  # the script seeds its own generators; this keeps the process tidy too
    script = tmp_path / "no_dgl.py"
    script.write_text(_NO_DGL_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, cwd=str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    theirs = [torch.tensor(t) for t in json.loads(proc.stdout.strip().splitlines()[-1])]
    namespace = {"__name__": "in_process"}
    exec(compile(_NO_DGL_SCRIPT.replace('sys.modules["dgl"] = None', "pass"), "no_dgl",
                 "exec"), namespace)
    ours = namespace["build"]()
    for a, b in zip(theirs, ours):
        # The same ops in the same order on one thread: the same numbers (float32 values
        # round-trip exactly through JSON's float64).
        assert torch.equal(a.to(b.dtype), b.detach())


def test_table_shaped_inputs_on_a_dgl_block_are_refused():
    # DGL's kernels do not check shapes: [N_dst, k] gaps on a block used to crash the process.
    import dgl as _dgl

    from tbdfs_dgl._tables import block_from_table
    from tbdfs_dgl.batch import LayerTable

    mask = torch.tensor([[True, True], [True, False]])
    table = LayerTable(src_nodes=torch.arange(5), src_ts=torch.zeros(5, dtype=torch.float64),
                       nbr=torch.tensor([[2, 3], [4, 0]]), mask=mask,
                       dt=torch.ones(2, 2, dtype=torch.float64),
                       eid=torch.tensor([[0, 1], [2, -1]]))
    block = block_from_table(table)
    assert isinstance(block, _dgl.DGLGraph) and block.num_edges() == 3
    conv = TemporalAttentionConv(4, 4, num_heads=2, edge_dim=3, time_dim=4)
    with pytest.raises(ValueError, match="dt must be"):
        conv(block, torch.randn(5, 4), None, table.dt)
    with pytest.raises(ValueError, match="dt must be"):
        conv(block, None, None, table.dt)
    with pytest.raises(ValueError, match="edge_feat must be"):
        conv(block, torch.randn(5, 4), torch.randn(2, 2, 3), table.dt[mask])
    out = conv(block, torch.randn(5, 4), torch.randn(3, 3), table.dt[mask])
    assert out.shape == (2, 4)
