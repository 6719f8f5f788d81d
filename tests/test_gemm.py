"""The CPU-shaped row-wise linear maps (tbdfs_dgl.nn._gemm) against plain F.linear."""
import pytest
import torch
import torch.nn.functional as F

from tbdfs_dgl.nn import _gemm
from tbdfs_dgl.nn._gemm import PaddedLinear, rows_linear


def _close(a, b, rel=1e-5):
    scale = max(float(b.abs().max()), 1e-30)
    assert float((a - b).abs().max()) <= rel * scale, (a - b).abs().max()


def _inputs(m, k, n, seed, wide=None):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g).requires_grad_()
    # A column slice of a wider weight, as the path encoder passes fc_v.weight[:, c].
    full = torch.randn(n, (wide or k) + 3, generator=g).requires_grad_()
    return x, full, torch.randn(m, n, generator=g)


@pytest.mark.parametrize("k,n", [(172, 172), (100, 100), (32, 20), (16, 20), (20, 16),
                                 (5, 3)])
@pytest.mark.parametrize("with_acc", [False, True])
def test_padded_linear_matches_linear_and_its_gradients(k, n, with_acc):
    seed = 1000 * k + n + with_acc
    print("seed", seed)
    x, full, grad = _inputs(257, k, n, seed)
    w = full[:, 2:2 + k]
    base = torch.randn(257, n, generator=torch.Generator().manual_seed(seed + 1))
    acc_leaf = base.clone().requires_grad_()

    def run(fn):
        for t in (x, full, acc_leaf):
            t.grad = None
        acc = acc_leaf * 1.0 if with_acc else None  # a fresh tensor, as callers pass
        out = fn(x, w, acc)
        out.backward(grad)
        return out.detach(), x.grad.clone(), full.grad.clone(), (
            acc_leaf.grad.clone() if with_acc else None)

    ref = run(lambda x_, w_, a: F.linear(x_, w_) if a is None else a + F.linear(x_, w_))
    got = run(lambda x_, w_, a: PaddedLinear.apply(x_, w_, a))
    for r, o in zip(ref, got):
        if r is not None:
            _close(o, r)
    assert got[0].is_contiguous() and got[0].shape == (257, n)
    # Columns of the wide weight outside the slice get no gradient.
    assert torch.equal(got[2][:, :2], torch.zeros(n, 2))


def test_padded_linear_skips_gradients_nobody_needs():
    x, full, grad = _inputs(64, 20, 20, 7)
    out = PaddedLinear.apply(x.detach(), full[:, :20], None)
    out.backward(grad)
    assert full.grad is not None and x.grad is None
    full.grad = None
    out = PaddedLinear.apply(x, full[:, :20].detach(), None)
    out.backward(grad)
    assert x.grad is not None and full.grad is None


def test_rows_linear_pads_only_long_cpu_products(monkeypatch):
    x, full, grad = _inputs(600, 20, 20, 3)
    w = full[:, :20]
    # Below the size threshold: the plain product.
    assert type(rows_linear(x, w).grad_fn).__name__ != "PaddedLinearBackward"
    monkeypatch.setattr(_gemm, "_PAD_MIN_OUTPUT", 600 * 20)
    out = rows_linear(x, w)
    assert type(out.grad_fn).__name__ == "PaddedLinearBackward"
    _close(out, F.linear(x, w))
    acc = torch.ones(600, 20) * 2.0
    _close(rows_linear(x, w, acc), 2.0 + F.linear(x, w))
    # Widths already multiples of 16, autocast, and tiny weights keep their own paths.
    x16, full16, _ = _inputs(600, 32, 32, 4)
    assert type(rows_linear(x16, full16[:, :32]).grad_fn).__name__ != "PaddedLinearBackward"
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert type(rows_linear(x, w).grad_fn).__name__ != "PaddedLinearBackward"
    tiny_x, tiny_full, _ = _inputs(600, 4, 4, 5)
    _close(rows_linear(tiny_x, tiny_full[:, :4]), F.linear(tiny_x, tiny_full[:, :4]))


needs_onednn = pytest.mark.skipif(_gemm._linear_op() is None,
                                  reason="this torch has no oneDNN linear op on this CPU")


@pytest.fixture
def onednn_for_any_size(monkeypatch):
    """Route products of every length to oneDNN (real batches reach it at 16,384 rows)."""
    monkeypatch.delenv("TBDFS_CPU_GEMM", raising=False)
    monkeypatch.setattr(_gemm, "_ONEDNN_MIN_ROWS", 1)


@needs_onednn
@pytest.mark.parametrize("k,n", [(100, 100), (172, 172), (16, 20), (40, 16)])
@pytest.mark.parametrize("with_acc", [False, True])
def test_onednn_rows_linear_matches_linear_and_its_gradients(k, n, with_acc,
                                                             onednn_for_any_size):
    seed = 2000 * k + n + with_acc
    print("seed", seed)
    x, full, grad = _inputs(300, k, n, seed)
    w = full[:, 1:1 + k]  # a strided column slice, which oneDNN must not read in place
    base = torch.randn(300, n, generator=torch.Generator().manual_seed(seed + 1))
    acc_leaf = base.clone().requires_grad_()

    def run(fn):
        for t in (x, full, acc_leaf):
            t.grad = None
        acc = acc_leaf * 1.0 if with_acc else None
        out = fn(x, w, acc)
        out.backward(grad)
        return out, x.grad.clone(), full.grad.clone(), (
            acc_leaf.grad.clone() if with_acc else None)

    ref = run(lambda x_, w_, a: F.linear(x_, w_) if a is None else a + F.linear(x_, w_))
    got = run(rows_linear)
    names = {type(got[0].grad_fn).__name__}
    if with_acc:
        names |= {type(f).__name__ for f, _ in got[0].grad_fn.next_functions if f}
    assert "_OneDNNLinearBackward" in names
    for r, o in zip(ref, got):
        if r is not None:
            _close(o.detach(), r.detach())
    assert torch.equal(got[2][:, :1], torch.zeros(n, 1))


@needs_onednn
def test_a_caller_may_lower_the_onednn_threshold(monkeypatch):
    # min_onednn_rows moves the long-product threshold for one call only.
    monkeypatch.delenv("TBDFS_CPU_GEMM", raising=False)
    x, full, _ = _inputs(300, 32, 24, seed=5)
    w = full[:, :32]
    plain = rows_linear(x, w)
    lowered = rows_linear(x, w, min_onednn_rows=256)
    assert type(plain.grad_fn).__name__ != "_OneDNNLinearBackward"
    assert type(lowered.grad_fn).__name__ == "_OneDNNLinearBackward"
    _close(lowered.detach(), plain.detach())
    assert type(rows_linear(x[:200], w, min_onednn_rows=256).grad_fn).__name__ != \
        "_OneDNNLinearBackward"


@needs_onednn
def test_few_outputs_linear_matches_matmul_and_its_gradients(onednn_for_any_size):
    g = torch.Generator().manual_seed(11)
    x = torch.randn(70, 9, 30, generator=g).requires_grad_()
    q = torch.randn(2, 45, generator=g).requires_grad_()
    grad = torch.randn(70, 9, 2, generator=g)
    outs = []
    for fn in (lambda: torch.matmul(x, q[:, 5:35].t()),
               lambda: _gemm.few_outputs_linear(x, q[:, 5:35])):
        x.grad = q.grad = None
        out = fn()
        out.backward(grad)
        outs.append((out.detach(), x.grad.clone(), q.grad.clone(), type(out.grad_fn).__name__))
    (*ref, _), (*got, name) = outs
    assert name == "_FewOutputsLinearBackward"
    for r, o in zip(ref, got):
        _close(o, r)
    assert torch.equal(got[2][:, :5], torch.zeros(2, 5))
    # Wider weights, float64 and autocast keep torch's own product.
    assert type(_gemm.few_outputs_linear(x, torch.randn(9, 30)).grad_fn).__name__ != name
    assert type(_gemm.few_outputs_linear(x.double(), q[:, :30].double()).grad_fn
                ).__name__ != name
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert type(_gemm.few_outputs_linear(x, q[:, :30]).grad_fn).__name__ != name


def test_cpu_gemm_backend_follows_the_environment(monkeypatch, onednn_for_any_size):
    x, full, _ = _inputs(64, 32, 32, 5)
    monkeypatch.setenv("TBDFS_CPU_GEMM", "mkl")
    assert _gemm.cpu_gemm_backend() == "mkl"
    assert "OneDNN" not in type(rows_linear(x, full[:, :32]).grad_fn).__name__
    monkeypatch.setenv("TBDFS_CPU_GEMM", " Auto ")
    want = "onednn" if _gemm._linear_op() is not None else "mkl"
    assert _gemm.cpu_gemm_backend() == want
    monkeypatch.setenv("TBDFS_CPU_GEMM", "blas")
    with pytest.raises(ValueError, match=r"TBDFS_CPU_GEMM must be one of \('auto', 'mkl'\), "
                                         r"got 'blas'"):
        rows_linear(x, full[:, :32])


def test_without_the_onednn_op_products_stay_torchs(monkeypatch, onednn_for_any_size):
    # A torch build without the op (or a non-x86 CPU): resolved once to "unavailable".
    monkeypatch.setattr(_gemm, "_onednn_op", False)
    assert _gemm.cpu_gemm_backend() == "mkl"
    x, full, _ = _inputs(64, 32, 32, 6)
    out = rows_linear(x, full[:, :32])
    assert "OneDNN" not in type(out.grad_fn).__name__
    _close(out, F.linear(x, full[:, :32]))
    monkeypatch.setattr(_gemm, "_onednn_op", None)
    monkeypatch.setattr(_gemm.platform, "machine", lambda: "aarch64")
    assert _gemm._linear_op() is None and _gemm.cpu_gemm_backend() == "mkl"
