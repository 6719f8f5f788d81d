"""``torch.compile`` traces the whole model in one graph (no graph breaks), with the values
and gradients of the eager model.

One graph is what lets a GPU run replay a training step as a CUDA graph
(``TrainConfig(compile=True, compile_mode='reduce-overhead')``): every graph break is a
return to Python and a separate capture.  Dynamo's ``eager`` backend is used so that the
test checks the tracing, not the compiler's code generation, in seconds.  Imports no DGL.
"""
import numpy as np
import pytest
import torch

from tbdfs_dgl import TBDFSModel, TemporalGraph, TemporalSampler
from tbdfs_dgl.linkpred import TrainConfig

SEED = 11


def padded_batch(fanouts=(3, 2), seed=SEED, num_roots=30):
    rng = np.random.default_rng(seed)
    n, m = 40, 400
    g = TemporalGraph(rng.integers(0, n, m), rng.integers(0, n, m),
                      np.sort(rng.uniform(0, 100, m)), num_nodes=n)
    s = TemporalSampler(g, list(fanouts), strategy="uniform", seed=seed, num_threads=1)
    batch = s.sample(rng.integers(0, n, num_roots), rng.uniform(0, 110, num_roots))
    return batch.padded(num_roots + 6)  # the trainer pads compiled batches likewise


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max()) / max(1e-6, float(b.abs().max()))


# torch 2.2's dynamo instantiates autograd.Function classes while tracing them.
@pytest.mark.filterwarnings("ignore:.*should not be instantiated:DeprecationWarning")
@pytest.mark.parametrize("kw", [{}, {"alpha": 1.0}, {"alpha": 0.0},
                                {"alpha": "learn", "path_inputs": "bfs"},
                                {"within_path_agg": "mean", "across_paths_agg": "mean"},
                                {"use_time": False}, {"time_encoding": "cos_sin"},
                                {"attn_norm": True, "attn_dim": 16},
                                {"attn_norm": True, "attn_residual": True},
                                {"empty_neighbourhood": "padding"},
                                {"empty_neighbourhood": "padding_node"}])
@pytest.mark.parametrize("fanouts", [(3, 2), (2,)])
def test_model_compiles_in_one_graph(kw, fanouts):
    print(f"seed {SEED}")
    torch.manual_seed(SEED)
    model = TBDFSModel(5, 4, 8, 12, num_layers=len(fanouts), dropout=0.0, **kw)
    gen = torch.Generator().manual_seed(SEED)
    nf, ef = torch.randn(40, 5, generator=gen), torch.randn(400, 4, generator=gen)
    batch = padded_batch(fanouts)

    ref = model(batch, nf, ef)
    ref.square().sum().backward()
    ref_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)

    torch._dynamo.reset()
    compiled = torch.compile(model, backend="eager", fullgraph=True)  # raises on a break
    out = compiled(batch, nf, ef)
    out.square().sum().backward()
    # The compiled time encoding reduces phases at a fixed cost (exact within a few ulps).
    assert rel_err(out, ref) <= 1e-5
    assert set(ref_grads) == {n for n, p in model.named_parameters() if p.grad is not None}
    for name, p in model.named_parameters():
        if name in ref_grads:
            assert rel_err(p.grad, ref_grads[name]) <= 1e-4, name


def test_compile_mode_needs_compile():
    assert TrainConfig(compile=True, compile_mode="reduce-overhead").compile_mode == \
        "reduce-overhead"
    with pytest.raises(ValueError, match="compile_mode is set but compile is False"):
        TrainConfig(compile_mode="reduce-overhead")
    with pytest.raises(ValueError, match="compile_mode must be one of"):
        TrainConfig(compile=True, compile_mode="fastest")
