"""The float kernels' two builds (``csrc/simd.h``: baseline x86-64 and AVX2) give the same
bits: each runs in a process of its own (``TBDFS_SIMD=baseline`` forces the baseline) on
the same inputs, and every output and gradient is compared exactly.

No DGL here: the sanitizer run (``make sanitize``) covers this file.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tbdfs_dgl

try:
    from tbdfs_dgl import _C
except Exception:  # pragma: no cover - only while the extension is not built
    _C = None
pytestmark = pytest.mark.skipif(_C is None or not hasattr(_C, "simd_isa"),
                                reason="extension not built")

# Runs in a fresh process: the variant is chosen once per process.
SCRIPT = r"""
import sys
import numpy as np
import torch
sys.path.insert(0, sys.argv[2])
from test_leaf_merge import inputs
from tbdfs_dgl import _C
from tbdfs_dgl.nn import _gathered_scores as gs, _leaf_merge as lm, _path_attention as pa

torch.set_num_threads(int(sys.argv[3]))
out = {"isa": np.array(_C.simd_isa())}
root, states, alpha, beta, parts, weight = inputs(9, 3, 4, 2, 7, 37, 2, 1)
torch.manual_seed(0)
h = lm.leaf_merge(root, states, alpha, beta, parts, weight, torch.nn.Dropout(0.3).train())
g = torch.randn(h.shape, generator=torch.Generator().manual_seed(1))
tensors = [root, states, alpha, beta] + [r for r, _ in parts]
out["leaf"] = h.detach().numpy()
for i, x in enumerate(torch.autograd.grad((h * g).sum(), tensors)):
    out[f"leaf_grad{i}"] = x.numpy()
gen = torch.Generator().manual_seed(2)
feat = torch.randn(9, 13, 37, generator=gen, requires_grad=True)
query = torch.randn(9, 2, 37, generator=gen, requires_grad=True)
mask = torch.rand(9, 13, generator=gen) < 0.7
drop = (torch.rand(9, 2, 13, generator=gen) < 0.8).float() / 0.8
agg, w = pa.path_attention(feat, query, mask, drop)
out["agg"], out["weight"] = agg.detach().numpy(), w.detach().numpy()
for i, x in enumerate(torch.autograd.grad((agg * agg).sum() + w.sum(), [feat, query])):
    out[f"agg_grad{i}"] = x.numpy()
rows = torch.randn(11, 37, generator=gen, requires_grad=True)
index = torch.randint(0, 11, (9 * 13,), generator=gen)
s = gs.gathered_scores([query], [(rows, index)])
out["scores"] = s.detach().numpy()
for i, x in enumerate(torch.autograd.grad((s * s).sum(), [query, rows])):
    out[f"scores_grad{i}"] = x.numpy()
np.savez(sys.argv[1], **out)
"""


def run_variant(path: Path, simd: str, threads: int) -> dict:
    tests = str(Path(__file__).parent)
    # The package the parent imported (the checkout, or an install), first on the path.
    package_root = str(Path(tbdfs_dgl.__file__).resolve().parents[1])
    search = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, TBDFS_SIMD=simd, PYTHONPATH=search)
    subprocess.run([sys.executable, "-c", SCRIPT, str(path), tests, str(threads)], env=env,
                   check=True, timeout=300)
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


@pytest.mark.parametrize("threads", [1, 3])
def test_baseline_and_avx2_builds_give_the_same_bits(tmp_path, threads):
    base = run_variant(tmp_path / "baseline.npz", "baseline", threads)
    best = run_variant(tmp_path / "best.npz", "", threads)
    assert str(base.pop("isa")) == "baseline"
    isa = str(best.pop("isa"))
    print(f"compared the baseline with {isa!r} (this machine's best)")
    assert base.keys() == best.keys()
    for key in base:
        assert np.array_equal(base[key], best[key]), key
