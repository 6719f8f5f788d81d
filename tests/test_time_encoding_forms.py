"""The time-encoding forms (TimeEncoder(encoding=...)): DyGLib's cos(w dt + b) against a slow
exact reference on every path (C++ kernel, torch, fixed-cost GPU/compiled), its gradients,
huge gaps; the choice recorded in checkpoints, old checkpoints loading as release 0.1."""
import math

import numpy as np
import pytest
import torch

import reference as ref
from tbdfs_dgl.nn import _native
from tbdfs_dgl.linkpred import load_checkpoint, save_checkpoint
from tbdfs_dgl.nn import TimeEncoder
from tbdfs_dgl.nn import time_encoder as te

torch.set_num_threads(1)


def cos_phase_encoder(time_dim=16, seed=0):
    """A cos_phase encoder moved off its initial grid (learned w and b)."""
    torch.manual_seed(seed)
    enc = TimeEncoder(time_dim, encoding="cos_phase")
    with torch.no_grad():
        enc.weight.mul_(torch.linspace(0.5, 3.0, time_dim))
        enc.bias.uniform_(-4.0, 4.0)
    return enc


def exact_cos_phase(enc, dt):
    """cos(w dt + b) with the exact product w dt (rational reduction), rotated by b in
    float64: the slow reference, good to ~1e-16 at any magnitude."""
    w = enc.weight.detach().double().tolist()
    b = enc.bias.detach().double().tolist()
    rows = []
    for t in dt:
        row = []
        for wk, bk in zip(w, b):
            c, s = ref.exact_cos_sin(wk, t)
            row.append(c * math.cos(bk) - s * math.sin(bk))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64)


def all_paths(enc, x, monkeypatch):
    """The encoding on each path: C++ kernel, torch reduction, pure-Python large-phase
    reduction, and the fixed-cost (GPU / compiled) one."""
    outs = {"native": enc(x).detach()}
    with _native.disabled("time_encode_phase"):
        outs["pairs kernel, rotated in torch"] = enc(x).detach()
    with _native.disabled("time_encode", "time_encode_phase"):
        outs["torch"] = enc(x).detach()
        with _native.disabled("reduce_phases"):
            outs["torch, pure Python reduction"] = enc(x).detach()
    with monkeypatch.context() as m:
        m.setattr(te, "compiling", lambda: True)
        outs["fixed"] = enc(x).detach()
    return outs


def test_cos_phase_shape_init_and_zero_gap():
    enc = TimeEncoder(100, encoding="cos_phase")
    assert enc.weight.shape == (100,) and enc.bias.shape == (100,)
    np.testing.assert_allclose(enc.weight.detach().numpy(), 1 / 10 ** np.linspace(0, 9, 100),
                               rtol=1e-6)
    assert not enc.bias.detach().any()
    assert torch.equal(enc(torch.zeros(3)), torch.ones(3, 100))  # cos(0 + 0)
    assert enc(torch.zeros(2, 5)).shape == (2, 5, 100)
    assert TimeEncoder(7, encoding="cos_phase").time_dim == 7  # odd widths are fine here
    assert not enc.normalize and TimeEncoder(4).normalize


@pytest.mark.parametrize("seed", [0, 1])
def test_cos_phase_matches_the_exact_reference_on_every_path(seed, monkeypatch):
    print("seed", seed)
    enc = cos_phase_encoder(seed=seed)
    rng = np.random.default_rng(seed)
    dt = np.concatenate([rng.uniform(0, 2e8, 60), rng.uniform(-50, 50, 20),
                         [0.0, 1e-12, np.pi / 2, 3e7, 1e8, -1e8, 2.0**28]])
    x = torch.from_numpy(dt)
    want = exact_cos_phase(enc, dt)
    outs = all_paths(enc, x, monkeypatch)
    for name, out in outs.items():
        assert out.dtype == torch.float32
        # float32 cos and sin of the reduced phase, rotated by b: a few ulps of 1
        assert float((out.double() - want).abs().max()) <= 4e-7, name
    assert float((outs["native"] - outs["torch"]).abs().max()) <= 3e-7
    assert not bool(enc.range_exceeded)


@pytest.mark.parametrize("dt", [[1e16, 1.6e18], [3e15, 1e16, -7e17, 2.0**52 + 2, 2.0**62],
                                [1e8, 2.0**29, 2.0**30 + 0.5, 123.25], [1e300, -3e250]])
def test_cos_phase_is_exact_at_huge_gaps(dt, monkeypatch):
    """Nanosecond-scale gaps: the exact paths stay right, the fixed-cost one raises its flag."""
    enc = cos_phase_encoder()
    x = torch.tensor(dt, dtype=torch.float64)
    want = exact_cos_phase(enc, dt)
    outs = all_paths(enc, x, monkeypatch)
    for name in ("native", "pairs kernel, rotated in torch", "torch",
                 "torch, pure Python reduction"):
        assert float(outs[name].abs().max()) <= 1 + 1e-6, name
        assert float((outs[name].double() - want).abs().max()) <= 4e-7, name
    assert bool(enc.range_exceeded)  # every case has a phase >= 2**29 rad
    with pytest.raises(te.TimeEncodingRangeError, match="coarser units"):
        enc.check_range()


def reference_grads(enc, dt, coef):
    """Gradients of sum(coef * cos(w dt + b)) by float64 autograd (small gaps, where the
    naive float64 phase is exact enough)."""
    w = enc.weight.detach().double().requires_grad_()
    b = enc.bias.detach().double().requires_grad_()
    (torch.cos(dt.unsqueeze(-1) * w + b) * coef.double()).sum().backward()
    return w.grad, b.grad


@pytest.mark.parametrize("path", ["native", "torch", "fixed"])
def test_cos_phase_gradients_match_float64_autograd(path, monkeypatch):
    enc = cos_phase_encoder(time_dim=8)
    dt = torch.tensor([[0.5, 3.0, 1e4], [7e7, 0.0, 12.5]], dtype=torch.float64)
    coef = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(3))
    if path == "fixed":
        monkeypatch.setattr(te, "compiling", lambda: True)
    off = ("time_encode", "time_encode_phase") if path == "torch" else ()
    with _native.disabled(*off):
        (enc(dt) * coef).sum().backward()
    gw, gb = reference_grads(enc, dt, coef)
    assert torch.allclose(enc.weight.grad.double(), gw, rtol=1e-4, atol=1e-6 * float(gw.abs().max()))
    assert torch.allclose(enc.bias.grad.double(), gb, rtol=1e-5, atol=1e-6)


def test_cos_phase_gradcheck_by_central_differences():
    """The analytic gradient against central differences of the encoder itself (float32
    output, so a step of 1e-3 and a matching tolerance)."""
    enc = cos_phase_encoder(time_dim=5, seed=2)
    dt = torch.tensor([0.3, 1.7, 4.0, 11.0], dtype=torch.float64)
    coef = torch.randn(4, 5, generator=torch.Generator().manual_seed(4))

    def loss():
        return float((enc(dt).double() * coef.double()).sum())

    (enc(dt) * coef).sum().backward()
    for param in (enc.weight, enc.bias):
        for k in range(param.shape[0]):
            with torch.no_grad():
                param[k] += 1e-3
                up = loss()
                param[k] -= 2e-3
                down = loss()
                param[k] += 1e-3
            numeric = (up - down) / 2e-3
            assert abs(float(param.grad[k]) - numeric) <= 2e-3 * max(1.0, abs(numeric)), k


def test_older_forms_unchanged_and_normalize_alias():
    dt = torch.tensor([0.0, 3.0, 1e6], dtype=torch.float64)
    scaled, unscaled = TimeEncoder(8), TimeEncoder(8, encoding="cos_sin_unscaled")
    assert scaled.encoding == "cos_sin" and scaled.bias is None
    assert torch.allclose(unscaled(dt), scaled(dt) * 2.0)
    with pytest.warns(DeprecationWarning, match="encoding="):
        assert TimeEncoder(8, normalize=False).encoding == "cos_sin_unscaled"
    with pytest.warns(DeprecationWarning):
        assert TimeEncoder(8, normalize=True, encoding="cos_sin").encoding == "cos_sin"
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="disagrees"):
        TimeEncoder(8, normalize=True, encoding="cos_phase")
    with pytest.raises(ValueError, match="time encoding must be one of"):
        TimeEncoder(8, encoding="sin")
    with pytest.raises(ValueError, match="even"):
        TimeEncoder(7, encoding="cos_sin_unscaled")
    none = TimeEncoder(6, use_time=False, encoding="cos_phase")
    assert list(none.parameters()) == [] and torch.equal(none(dt), torch.zeros(3, 6))


def write_raw_checkpoint(path, model_kwargs, state_dict):
    """A checkpoint file with exactly these arguments (as older versions wrote them)."""
    import hashlib
    import io
    import json

    from tbdfs_dgl.linkpred.checkpoints import _CKPT_MAGIC

    buf = io.BytesIO()
    torch.save({"model_kwargs": dict(model_kwargs), "extra": {},
                "state_dict": {k: v.detach() for k, v in state_dict.items()}}, buf)
    body = buf.getvalue()
    header = json.dumps({"format": 1, "sha256": hashlib.sha256(body).hexdigest(),
                         "size": len(body)}).encode() + b"\n"
    with open(path, "wb") as f:
        f.write(_CKPT_MAGIC + header + body)


def test_model_records_the_form_and_old_checkpoints_load_as_release_0_1(tmp_path):
    from tbdfs_dgl import TBDFSModel

    kwargs = dict(node_dim=0, edge_dim=0, time_dim=8, hidden_dim=8, alpha=1.0)
    path = str(tmp_path / "m.pt")
    for form in ("cos_sin", "cos_sin_unscaled", "cos_phase"):
        model = TBDFSModel(**kwargs, time_encoding=form)
        assert model.time_encoding == form and model.time_encoder.encoding == form
        save_checkpoint(path, model, kwargs)  # kwargs without the form: recorded anyway
        again, _ = load_checkpoint(path)
        assert again.time_encoding == form
        for (k, v), (_, u) in zip(model.state_dict().items(), again.state_dict().items()):
            assert torch.equal(v, u), k
    assert "time_encoder.bias" in TBDFSModel(**kwargs, time_encoding="cos_phase").state_dict()
    # A checkpoint written before the choice existed (no form in its arguments) is a
    # release-0.1 model whatever today's default.
    old = TBDFSModel(**kwargs, time_encoding="cos_sin", attn_norm=False)
    write_raw_checkpoint(path, kwargs, old.state_dict())
    loaded, _ = load_checkpoint(path)
    assert loaded.time_encoding == "cos_sin"
    # Weights of another form than the recorded one: a message that says what to do.
    write_raw_checkpoint(path, kwargs, TBDFSModel(**kwargs).state_dict())
    with pytest.raises(ValueError, match="load it with the form it was trained with"):
        load_checkpoint(path)
    with pytest.raises(ValueError, match="even"):
        TBDFSModel(**dict(kwargs, time_dim=7), time_encoding="cos_sin")
    assert TBDFSModel(**dict(kwargs, time_dim=7), time_encoding="cos_phase").time_dim == 7


def test_cos_phase_kernel_is_thread_independent_and_checks_its_buffers():
    kernel = _native.native("time_encode_phase")
    if kernel is None:
        pytest.skip("the compiled extension is not built")
    rng = np.random.default_rng(0)
    dt = np.concatenate([rng.uniform(0, 2e8, 3000), [0.0, 1e17, -3e250]])
    w = rng.uniform(1e-9, 2.0, 70)  # more than one block of frequencies
    cb, sb = np.cos(rng.uniform(-3, 3, 70)).astype(np.float32), np.zeros(70, np.float32)
    sb[:] = np.sqrt(1 - cb.astype(np.float64) ** 2)
    outs = []
    for threads in (1, 2, 7):
        c, s = np.empty((len(dt), 70), np.float32), np.empty((len(dt), 70), np.float32)
        kernel(dt, w, cb, sb, c, s, threads)
        outs.append((c, s))
    assert all(np.array_equal(outs[0][0], c) and np.array_equal(outs[0][1], s)
               for c, s in outs[1:])
    c, s = outs[0]
    assert np.abs(c.astype(np.float64) ** 2 + s.astype(np.float64) ** 2 - 1).max() < 1e-6
    ok = np.empty((len(dt), 70), np.float32)
    with pytest.raises(ValueError, match="shape"):
        kernel(dt, w, cb, sb, np.empty((len(dt), 69), np.float32), ok)
    with pytest.raises(ValueError, match="length of weight"):
        kernel(dt, w, cb[:3], sb, ok, ok.copy())
    with pytest.raises(TypeError):  # never written into a converted copy
        kernel(dt, w, cb, sb, np.empty((len(dt), 70)), ok)
    with pytest.raises(ValueError, match="num_threads"):
        kernel(dt, w, cb, sb, ok, ok.copy(), 0)
