"""Early learning curve of tBDFS/TGAT: validation/test AP after 0, 10, 20, 40, 80, 160 steps.

Issue 14: DyGLib's TGAT separates CollegeMsg's validation links after 20 steps while ours
stayed at chance after 40.  This script trains ours step by step under the issue's protocol
and evaluates at fixed step counts, with one switch per suspected cause (ablations, applied
one at a time; the time-encoding forms are the library's, the rest monkeypatches).

Protocol (the issue's): the chronological 70/15/15 split of :mod:`tbdfs_dgl.linkpred`; each
"epoch" is the first ``--epoch-batches`` (20) training batches of 200 in time order, so step
``s`` trains on batch ``s % 20``; evaluation scores the first ``--eval-batches`` (20) batches
of validation and of test against fixed uniform negatives among all destinations (drawn once
per run with the trainer's seeds).  ``--epoch-batches 0`` walks whole training epochs in time
order instead.  Every model/run starts from ``seed_everything(--seed)``.

Examples (CPU, one thread; ~2-5 min per run on CollegeMsg)::

    python scripts/learning_curve.py --data collegemsg --alpha 1,0.5
    python scripts/learning_curve.py --alpha 1 --time-enc cos-phase       # one ablation
    python scripts/learning_curve.py --alpha 1 --neg active               # another one
    python scripts/learning_curve.py --alpha 1 --ablations baseline,time-enc=unscaled,loss=mean

``--ablations`` runs a comma list of ``name=value`` overrides (``baseline``: none), each
alone on top of the other flags, and prints one table.  The DyGLib side runs with
``scripts/dyglib_tgat_curve.py`` (see its docstring).

AP columns: ``AP`` pools all scored links (as our trainer); ``bAP`` is the mean of per-batch
APs (as DyGLib reports).

Findings, measured numbers and the exact commands: ``docs/learning_efficiency.md``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import types
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dgl  # noqa: E402
from sklearn.metrics import average_precision_score  # noqa: E402

from tbdfs_dgl import TBDFSModel, seed_everything  # noqa: E402
from tbdfs_dgl.data import load_dataset  # noqa: E402
from tbdfs_dgl.graph import TemporalGraph  # noqa: E402
from tbdfs_dgl.linkpred import NegativeSampler, chronological_split  # noqa: E402
from tbdfs_dgl.nn import TemporalAttentionConv  # noqa: E402
from tbdfs_dgl.nn._common import reset_attention  # noqa: E402
from tbdfs_dgl.sampler import TemporalSampler  # noqa: E402
from tbdfs_dgl._tables import block_from_table  # noqa: E402
from tbdfs_dgl.batch import LayerTable  # noqa: E402

ORIG_CONV_FORWARD = TemporalAttentionConv.forward


# ------------------------------------------------------------- ablation: empty neighbourhoods
def _merge_raw(conv: TemporalAttentionConv, h_dst: Optional[torch.Tensor], agg: torch.Tensor):
    """The layer's merge FFN(h_i || a_i) read straight from a_i (h_i = 0 when None), with
    dropout on its hidden layer (TGAT's place), whatever the layer's form."""
    w1 = conv.fc1.weight
    if h_dst is None:
        pre = F.linear(agg, w1[:, conv._in_dst_dim:], conv.fc1.bias)
    else:
        pre = conv.fc1(torch.cat([h_dst, agg], dim=-1))
    return conv.fc2(conv.feat_drop(F.relu(pre)))


def conv_forward_pad_raw(self, block, feat, edge_feat=None, dt=None, padding_feat=None):
    r"""``--empty pad-raw``: a destination without eligible neighbours attends over padding
    at time 0 as with the library's ``empty_neighbourhood='padding'``
    (:math:`a_i = W_V [0 \| 0 \| \Phi(t_i)]`, ``--empty pad``), but its :math:`a_i` enters
    the merge directly, skipping the attn_norm form's W_O and LayerNorm (in TGAT's form
    the two are the same).  What round 10's first padded runs of the form measured."""
    out = ORIG_CONV_FORWARD(self, block, feat, edge_feat, dt, padding_feat)
    num_dst = out.shape[0]
    if isinstance(block, LayerTable):  # the model's dense tables
        empty, dst_ts = ~block.mask.any(dim=1), block.src_ts[:num_dst]
    else:
        empty, dst_ts = block.in_degrees() == 0, block.dstdata["ts"]
    if not bool(empty.any()) or not self._time_dim:
        return out
    idx = torch.nonzero(empty).squeeze(1)
    t = dst_ts[idx].to(torch.float64)
    D, E, T = self._in_src_dim, self._edge_dim, self._time_dim
    phi = self.time_encoder(t)
    agg = F.linear(phi, self.fc_v.weight[:, D + E:D + E + T])
    h_dst = None
    if feat is not None:
        h_dst = (feat[1] if isinstance(feat, tuple) else feat[:num_dst])[idx]
    out = out.clone()
    out[idx] = _merge_raw(self, h_dst, agg)
    return out


# --------------------------------------------------------- ablation: DyGLib's attention layer
class DyGLibLayer(nn.Module):
    r"""DyGLib's TGAT layer on our blocks (dense per edge).

    ``q = W_Q[h_i || Phi(0)]``, ``k, v = W_{K,V}[h_j || x_ij || Phi(dt)]`` with head width
    ``(D + T) / H``; ``o = LayerNorm(Dropout(W_O a + b_O) + [h_i || Phi(0)])``;
    output ``fc2(ReLU(fc1([o || h_i])))`` -- MultiHeadAttention + MergeLayer of DyGLib's
    models/TGAT.py, with torch's default initialisation.  One difference to DyGLib: its
    merge reads the raw node features ``x_i`` (zero on a featureless graph), this one the
    layer's input ``h_i`` (zero in the first layer, the first layer's output in the
    second).  Destinations without in-edges get ``a = 0``.

    ``parts`` leaves one piece out at a time (``--layer dyglib-no<part>``): ``norm``
    (no LayerNorm), ``res`` (no residual onto ``[h_i || Phi(0)]``), ``out`` (no ``W_O``:
    the attention output itself), ``torchinit`` (our Xavier-normal init instead of
    torch's default).
    """

    PARTS = ("norm", "res", "out", "torchinit")

    def __init__(self, conv: TemporalAttentionConv, dropout: float,
                 parts: Sequence[str] = PARTS) -> None:
        super().__init__()
        self.parts = frozenset(parts)
        self.time_encoder = conv.time_encoder
        D, E, T, H = conv._in_src_dim, conv._edge_dim, conv._time_dim, conv._num_heads
        self.D, self.E, self.T, self.H = D, E, T, H
        qd = D + T
        assert qd % H == 0
        self.dk = qd // H
        self.fc_q = nn.Linear(qd, qd, bias=False)
        self.fc_k = nn.Linear(D + E + T, qd, bias=False)
        self.fc_v = nn.Linear(D + E + T, qd, bias=False)
        self.fc_o = nn.Linear(qd, qd)
        self.norm = nn.LayerNorm(qd)
        self.drop = nn.Dropout(dropout)
        self.fc1 = nn.Linear(qd + D, D)
        self.fc2 = nn.Linear(D, D)
        if "torchinit" not in self.parts:
            reset_attention((self.fc_q, self.fc_k, self.fc_v, self.fc_o), (self.fc1, self.fc2))
            nn.init.zeros_(self.fc_o.bias)

    def forward(self, block, feat, edge_feat=None, dt=None, padding_feat=None):
        if padding_feat is not None:
            raise SystemExit("--layer dyglib pads nothing: use it without --empty pad-deep")
        if isinstance(block, LayerTable):  # edge_feat then comes per table slot
            mask = block.mask
            block = block_from_table(block)
            if edge_feat is not None:
                edge_feat = edge_feat[mask]
            if dt is not None:
                dt = dt[mask]
        num_dst = block.num_dst_nodes()
        n_src = block.num_src_nodes()
        dev = block.device
        if dt is None:
            dt = block.edata["dt"]
        h_src = torch.zeros(n_src, self.D, device=dev) if feat is None else feat
        h_dst = h_src[:num_dst]
        src, dst = block.edges()
        parts = [h_src[src]]
        if self.E:
            parts.append(edge_feat if edge_feat is not None
                         else torch.zeros(len(src), self.E, device=dev))
        parts.append(self.time_encoder(dt))
        z = torch.cat(parts, dim=-1)
        phi0 = self.time_encoder(dt.new_zeros(num_dst))
        qin = torch.cat([h_dst, phi0], dim=-1)
        H, dk = self.H, self.dk
        q = self.fc_q(qin).view(num_dst, H, dk)
        k = self.fc_k(z).view(-1, H, dk)
        v = self.fc_v(z).view(-1, H, dk)
        score = (q[dst] * k).sum(-1, keepdim=True) / math.sqrt(dk)  # [E, H, 1]
        a = self.drop(dgl.nn.functional.edge_softmax(block, score))
        agg = torch.zeros(num_dst, H, dk, device=dev).index_add_(0, dst, a * v)
        o = agg.reshape(num_dst, -1)
        o = self.drop(self.fc_o(o) if "out" in self.parts else o)
        if "res" in self.parts:
            o = o + qin
        if "norm" in self.parts:
            o = self.norm(o)
        return self.fc2(F.relu(self.fc1(torch.cat([o, h_dst if feat is not None
                                                   else torch.zeros_like(h_dst)], dim=-1))))


# ------------------------------------------------------------------------------ the runner
ABLATION_KEYS = ("time_enc", "empty", "layer", "attn_dim", "attn_norm", "attn_res", "merge_drop",
                 "merge_h", "neg", "loss", "lr", "dropout", "init", "hidden_dim", "time_dim",
                 "eval_neg", "dfs_gain", "dfs_norm")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", default="collegemsg", help="dataset name or path")
    p.add_argument("--data-dir", default=None,
                   help="dataset folder (default: tbdfs_dgl.data.default_data_dir(), i.e. "
                        "$TBDFS_DATA_DIR, else ../shared/data)")
    p.add_argument("--alpha", default="1,0.5", help="comma list of alphas (or learn)")
    p.add_argument("--fanouts", default="20,20")
    p.add_argument("--strategy", default="recent")
    p.add_argument("--batch-size", type=int, default=200)
    p.add_argument("--steps", default="0,10,20,40,80,160", help="evaluate after these steps")
    p.add_argument("--epoch-batches", type=int, default=20,
                   help="training batches per epoch (the first ones in time order); 0: all")
    p.add_argument("--eval-batches", type=int, default=20,
                   help="first batches of validation and of test scored; 0: all")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--feat-dim", type=int, default=0,
                   help="zero node/edge features of this width (DyGLib's 172); 0: none")
    # ablations (defaults = ours as it is)
    # The defaults below are release 0.1's model and protocol ("ours as it is" in the
    # doc); the library's defaults are now --time-enc cos-phase --neg active.
    p.add_argument("--time-enc", dest="time_enc", default="ours",
                   choices=["ours", "unscaled", "cos-phase", "dyglib-f32"],
                   help="time_encoding cos_sin (release 0.1), cos_sin_unscaled, cos_phase; "
                        "dyglib-f32: cos_phase computed as DyGLib computes it, "
                        "cos(w·Δt + b) in float32 (phases rounded, not reduced exactly)")
    p.add_argument("--empty", default="none", choices=["none", "pad", "pad-raw", "pad-deep"],
                   help="pad: empty neighbourhoods attend over DyGLib's time-0 padding "
                        "(TBDFSModel(empty_neighbourhood='padding')); pad-raw: the same, but "
                        "the padded attention output skips the attn_norm form's W_O and "
                        "LayerNorm (and its merge takes TGAT's dropout place); pad-deep: pad, "
                        "with the padding node's own embedding in the slots above the first "
                        "layer, TGAT's and DyGLib's recursion "
                        "(TBDFSModel(empty_neighbourhood='padding_node'))")
    p.add_argument("--layer", default="ours",
                   choices=["ours", "dyglib"] + [f"dyglib-no{x}" for x in DyGLibLayer.PARTS])
    p.add_argument("--attn-dim", dest="attn_dim", type=int, default=0,
                   help="the library's layer with this attention width "
                        "(TBDFSModel(attn_dim=)); 0: hidden_dim")
    p.add_argument("--attn-norm", dest="attn_norm", default="off", choices=["off", "on"],
                   help="the library's layer with W_O + LayerNorm on the attention output "
                        "(TBDFSModel(attn_norm=True))")
    p.add_argument("--attn-res", dest="attn_res", default="off", choices=["off", "on"],
                   help="with --attn-norm on: DyGLib's residual [h_i || Phi(0)] before the "
                        "LayerNorm (TBDFSModel(attn_residual=True); needs --attn-dim = "
                        "hidden_dim + time_dim)")
    p.add_argument("--merge-drop", dest="merge_drop", default="on", choices=["on", "off"],
                   help="off: no dropout on the merge FFN's hidden layer of the library's "
                        "BFS layers (DyGLib's MergeLayer has none; --attn-norm on moves it "
                        "there itself)")
    p.add_argument("--merge-h", dest="merge_h", default="on", choices=["on", "off"],
                   help="off: the library's BFS merge FFN does not read h_i (its h_i columns "
                        "held at zero), as DyGLib's merge reads the raw node features, zero "
                        "on a featureless graph")
    p.add_argument("--neg", default="train-dst", choices=["train-dst", "all-dst", "active"],
                   help="training negatives: among training destinations (ours, DyGLib), "
                        "all destinations, or training destinations already active "
                        "(first seen before the batch)")
    p.add_argument("--eval-neg", dest="eval_neg", default="all-dst", choices=["all-dst"])
    p.add_argument("--loss", default="sum", choices=["sum", "mean"],
                   help="sum of the two mean BCEs (ours) or one mean over pos+neg (DyGLib)")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--init", default="ours", choices=["ours", "torch", "torch-layers"],
                   help="torch: torch's default init for every linear map; torch-layers: "
                        "for the BFS layers' only (as DyGLibLayer has it)")
    p.add_argument("--dfs-gain", dest="dfs_gain", type=float, default=1.0,
                   help="tBDFS only: multiply the path aggregator's output map W_O by this at "
                        "initialisation (at 1, |h_DFS| starts about 3x |h_BFS| on CollegeMsg; "
                        "0.25 starts it at or below |h_BFS|)")
    p.add_argument("--dfs-norm", dest="dfs_norm", default="off", choices=["off", "match"],
                   help="tBDFS only: match rescales h_DFS, root by root, to the norm of its "
                        "h_BFS before the blend, so neither branch can outgrow the other")
    p.add_argument("--branch-norms", dest="branch_norms", action="store_true",
                   help="tBDFS only: at initialisation and at every checkpoint, record the mean L2 norms of h_BFS "
                        "and h_DFS on the first validation batch (curve rows' 'h_bfs_norm', "
                        "'h_dfs_norm')")
    p.add_argument("--hidden-dim", dest="hidden_dim", type=int, default=100)
    p.add_argument("--time-dim", dest="time_dim", type=int, default=100)
    p.add_argument("--ablations", default=None,
                   help="comma list of name=value runs (e.g. baseline,neg=active)")
    p.add_argument("--json", default=None, help="also write the results here")
    p.add_argument("--heuristics", action="store_true",
                   help="only print what single-feature scores (history, degree, recency) "
                        "reach on the same train/val/test links, and exit")
    return p.parse_args(argv)


class Run:
    def __init__(self, args: argparse.Namespace, data, split) -> None:
        self.a, self.data, self.split = args, data, split
        tr = split.train
        self.train_rows = np.flatnonzero(tr)
        fan = [int(x) for x in args.fanouts.split(",")]
        kw = dict(fanouts=fan, strategy=args.strategy, time_rule="strict", seed=args.seed,
                  num_threads=1)
        self.train_sampler = TemporalSampler(
            TemporalGraph(data.src[tr], data.dst[tr], data.ts[tr], num_nodes=data.num_nodes), **kw)
        self.eval_sampler = TemporalSampler(
            TemporalGraph(data.src, data.dst, data.ts, num_nodes=data.num_nodes), **kw)
        self.train_rows_t = torch.from_numpy(self.train_rows)
        self.train_neg = NegativeSampler(data, tr)
        self.eval_neg = NegativeSampler(data)
        # first time each training destination appears in the training graph (for 'active')
        first = np.full(data.num_nodes, np.inf)
        r = self.train_rows[::-1]
        first[data.dst[r]] = data.ts[r]
        first[data.src[r]] = np.minimum(first[data.src[r]], data.ts[r])
        first[data.dst[r]] = np.minimum(first[data.dst[r]], data.ts[r])
        cand = self.train_neg.candidates
        order = np.argsort(first[cand], kind="stable")
        self.active_cand, self.active_first = cand[order], first[cand][order]
        ef = None if data.edge_feat is None else torch.from_numpy(data.edge_feat).float()
        nf = None if data.node_feat is None else torch.from_numpy(data.node_feat).float()
        self.edge_feat, self.node_feat = ef, nf

    # -- data
    def negatives(self, kind: str, n: int, t0: float, rng: np.random.Generator) -> np.ndarray:
        if kind == "train-dst":
            return self.train_neg(n, rng)
        if kind == "all-dst":
            return self.eval_neg(n, rng)
        k = int(np.searchsorted(self.active_first, t0, side="left"))  # first seen before t0
        if k == 0:
            return self.train_neg(n, rng)
        return self.active_cand[rng.integers(0, k, n)].astype(np.int64)

    def train_item(self, step: int, neg: str):
        bs, eb = self.a.batch_size, self.a.epoch_batches
        n_batches = math.ceil(len(self.train_rows) / bs)
        per = min(eb, n_batches) if eb else n_batches
        epoch, b = divmod(step, per)
        rows = self.train_rows[b * bs:(b + 1) * bs]
        rng = np.random.default_rng([self.a.seed, epoch, b, 1])
        t = self.data.ts[rows].astype(np.float64)
        return (self.data.src[rows], self.data.dst[rows], self.negatives(neg, len(rows), t[0], rng), t)

    def eval_items(self, part: str):
        rows = np.flatnonzero(getattr(self.split, part))
        bs, n = self.a.batch_size, self.a.eval_batches
        if n:
            rows = rows[:n * bs]
        rng = np.random.default_rng([self.a.seed, 0 if part == "val" else 1, 2])
        neg = self.eval_neg(len(rows), rng)
        t = self.data.ts[rows].astype(np.float64)
        return [(self.data.src[rows[i:i + bs]], self.data.dst[rows[i:i + bs]], neg[i:i + bs],
                 t[i:i + bs]) for i in range(0, len(rows), bs)]

    @staticmethod
    def sample(sampler, item):
        """The batch of an item's sources, destinations and negatives, at the links' times."""
        src, dst, neg, t = item
        return sampler.sample(np.concatenate([src, dst, neg]), np.concatenate([t, t, t]))

    def embed(self, model, sampler, item, remap: bool):
        src = item[0]
        batch = self.sample(sampler, item)
        if remap:  # the training graph numbers its interactions 0..; map to dataset rows
            rows = self.train_rows_t
            for table in batch.layers:
                table.eid = torch.where(table.eid >= 0, rows[table.eid.clamp(min=0)], table.eid)
            e = batch.paths.eids
            batch.paths.eids = torch.where(e >= 0, rows[e.clamp(min=0)], e)
        h = model(batch, self.node_feat, self.edge_feat)
        n = len(src)
        return model.score(h[:n], h[n:2 * n]), model.score(h[:n], h[2 * n:])

    @torch.no_grad()
    def evaluate(self, model, items) -> Dict[str, float]:
        model.eval()
        ps, ns, baps = [], [], []
        for it in items:
            p, n = self.embed(model, self.eval_sampler, it, remap=False)
            p, n = p.numpy(), n.numpy()
            ps.append(p)
            ns.append(n)
            baps.append(average_precision_score(np.r_[np.ones(len(p)), np.zeros(len(n))], np.r_[p, n]))
        p, n = np.concatenate(ps), np.concatenate(ns)
        ap = average_precision_score(np.r_[np.ones(len(p)), np.zeros(len(n))], np.r_[p, n])
        model.train()
        return {"ap": float(ap), "bap": float(np.mean(baps))}


# --time-enc: the library's time-encoding forms (TBDFSModel(time_encoding=...)).
TIME_ENCODINGS = {"ours": "cos_sin", "unscaled": "cos_sin_unscaled", "cos-phase": "cos_phase",
                  "dyglib-f32": "cos_phase"}


def time_encode_float32(self, dt: torch.Tensor) -> torch.Tensor:
    """``--time-enc dyglib-f32``: DyGLib's ``TimeEncoder``, ``cos(Linear(1, d)(Δt))`` with
    Δt, the product and the cosine in float32.  A gap of 1e6 s times a frequency of 1 is
    then rounded to 1/16 rad, an absolute time of 1e9 s to 64 s: for large gaps the high
    frequencies are a fixed but rounded function of Δt, where the library's are exact."""
    x = dt.to(torch.float32).unsqueeze(-1)
    return torch.cos(x * self.weight + self.bias)


def add_dfs_norm(model: nn.Module) -> None:
    """Rescale h_DFS, root by root, to the norm of that root's h_BFS (``--dfs-norm match``).

    A patch of this model instance, not a library option: the aggregator's ``_aggregate``,
    which the model calls with h_BFS as its query (second argument), is wrapped; gradients
    flow through both norms."""
    agg = model.path_aggregator
    inner = agg._aggregate

    def aggregate(path_feat, query, *args, **kwargs):
        out = inner(path_feat, query, *args, **kwargs)
        h = out[0] if isinstance(out, tuple) else out  # get_attention: (h_dfs, weights)
        h = h * (query.norm(dim=-1, keepdim=True) / h.norm(dim=-1, keepdim=True).clamp_min(1e-6))
        return (h,) + tuple(out[1:]) if isinstance(out, tuple) else h

    agg._aggregate = aggregate


@torch.no_grad()
def branch_norms(run: "Run", model: nn.Module, item) -> Dict[str, float]:
    """Mean L2 norms of h_BFS and h_DFS over the roots of one evaluation batch."""
    batch = run.sample(run.eval_sampler, item)
    model.eval()
    _, att = model(batch, run.node_feat, run.edge_feat, get_attention=True)
    model.train()
    return {"h_bfs_norm": float(att.h_bfs.norm(dim=-1).mean()),
            "h_dfs_norm": float(att.h_dfs.norm(dim=-1).mean())}


def build_model(a: argparse.Namespace, data, alpha: Any) -> nn.Module:
    TemporalAttentionConv.forward = (conv_forward_pad_raw if a.empty == "pad-raw"
                                     else ORIG_CONV_FORWARD)
    model = TBDFSModel(node_dim=data.node_dim, edge_dim=data.edge_dim,
                       time_dim=a.time_dim, hidden_dim=a.hidden_dim,
                       num_layers=len(a.fanouts.split(",")), num_heads=2, dropout=a.dropout,
                       alpha=alpha, time_encoding=TIME_ENCODINGS[a.time_enc],
                       # explicit, so that "baseline" stays TGAT's form whatever the
                       # library's defaults (--init torch-layers gives torch's init)
                       attn_dim=a.attn_dim or a.hidden_dim, attn_norm=a.attn_norm == "on",
                       attn_residual=a.attn_res == "on",
                       attn_init="xavier",
                       # --empty pad is the library's padding; explicit, so that "baseline"
                       # stays unpadded whatever the library's default
                       empty_neighbourhood={"pad": "padding", "pad-deep": "padding_node"}.get(
                           a.empty, "zero"))
    if a.time_enc == "dyglib-f32":
        model.time_encoder.forward = types.MethodType(time_encode_float32, model.time_encoder)
    if a.merge_drop == "off" and a.attn_norm == "off":  # attn_norm has none already
        for layer in model.layers:
            layer.feat_drop = nn.Identity()
    if a.layer.startswith("dyglib"):
        drop = a.layer.split("-no")[1:]  # dyglib-no<part>: that part left out
        parts = [x for x in DyGLibLayer.PARTS if x not in drop]
        model.layers = nn.ModuleList(DyGLibLayer(l, a.dropout, parts) for l in model.layers)
    if a.init != "ours":
        for m in (model if a.init == "torch" else model.layers).modules():
            if isinstance(m, nn.Linear):
                m.reset_parameters()
    if a.dfs_gain != 1.0 and model.path_aggregator is not None:
        with torch.no_grad():  # after the init above, which would undo it
            model.path_aggregator.fc_o.weight.mul_(a.dfs_gain)
    if a.dfs_norm == "match" and model.path_aggregator is not None:
        add_dfs_norm(model)
    if a.merge_h == "off":
        if data.node_dim:
            raise SystemExit("--merge-h off stands for DyGLib's merge of zero raw node "
                             "features: featureless graphs only")
        for layer in model.layers:  # after the init, which would undo it
            cols = layer._in_dst_dim  # fc1 reads [h_i || a_i]: the first columns are h_i
            with torch.no_grad():
                layer.fc1.weight[:, :cols] = 0.0
            mask = torch.ones_like(layer.fc1.weight)
            mask[:, :cols] = 0.0
            layer.fc1.weight.register_hook(lambda g, m=mask: g * m)
    return model


def run_curve(a: argparse.Namespace, data, split, alpha: Any, log=print) -> Dict[str, Any]:
    torch.set_num_threads(a.threads)
    seed_everything(a.seed)
    run = Run(a, data, split)
    model = build_model(a, data, alpha)
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    val_items, test_items = run.eval_items("val"), run.eval_items("test")
    checkpoints = sorted({int(s) for s in a.steps.split(",")})
    out = {"alpha": alpha, "parameters": n_params, "curve": [], "losses": []}
    t0 = time.perf_counter()
    step = 0
    model.train()
    losses = []
    train_seconds = 0.0  # optimiser steps only (sampling included), not the evaluations
    if a.branch_norms and model.path_aggregator is not None:
        out["branch_norms_init"] = branch_norms(run, model, val_items[0])
        log(f"  alpha={alpha} step    0 | " + ", ".join(
            f"{k} {v:.2f}" for k, v in out["branch_norms_init"].items()))
    for target in checkpoints:
        while step < target:
            t_step = time.perf_counter()
            pos, neg = run.embed(model, run.train_sampler, run.train_item(step, a.neg), True)
            if a.loss == "sum":
                loss = F.binary_cross_entropy_with_logits(pos, torch.ones_like(pos)) + \
                    F.binary_cross_entropy_with_logits(neg, torch.zeros_like(neg))
            else:
                logits = torch.cat([pos, neg])
                loss = F.binary_cross_entropy_with_logits(
                    logits, torch.cat([torch.ones_like(pos), torch.zeros_like(neg)]))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(float(loss) / (2 if a.loss == "sum" else 1))  # per-link BCE
            step += 1
            train_seconds += time.perf_counter() - t_step
        v, te = run.evaluate(model, val_items), run.evaluate(model, test_items)
        recent = float(np.mean(losses[-10:])) if losses else float("nan")
        row = {"step": step, "val_ap": v["ap"], "val_bap": v["bap"], "test_ap": te["ap"],
               "test_bap": te["bap"], "train_bce": recent, "seconds": time.perf_counter() - t0,
               "train_seconds": train_seconds}
        if a.branch_norms and model.path_aggregator is not None:
            row.update(branch_norms(run, model, val_items[0]))
        out["curve"].append(row)
        log(f"  alpha={alpha} step {step:4d} | val AP {v['ap']:.3f} (bAP {v['bap']:.3f}) | "
            f"test AP {te['ap']:.3f} (bAP {te['bap']:.3f}) | train BCE(last10) {recent:.3f} "
            f"| {row['seconds']:.0f}s" + "".join(
                f" | {k} {row[k]:.2f}" for k in ("h_bfs_norm", "h_dfs_norm") if k in row))
    out["losses"] = losses
    return out


def heuristics(data, split, a: argparse.Namespace) -> None:
    """AP of single-feature scores of the destination (no learning): has it any history,
    log(1 + #past interactions), recency -(t - its last interaction); and the share of
    positive / negative destinations with history.  On the training links (graph: training
    interactions, training-destination negatives) and on val/test (graph: everything)."""
    def past(rows_graph, q_nodes, q_t):
        nodes = np.r_[data.src[rows_graph], data.dst[rows_graph]]
        tt = np.r_[data.ts[rows_graph], data.ts[rows_graph]].astype(np.float64)
        o = np.lexsort((tt, nodes))
        nodes, tt = nodes[o], tt[o]
        lo, hi = np.searchsorted(nodes, q_nodes), np.searchsorted(nodes, q_nodes, "right")
        cnt = np.array([np.searchsorted(tt[l:h], t) for l, h, t in zip(lo, hi, q_t)])
        last = np.where(cnt > 0, tt[np.maximum(lo + cnt - 1, 0)], q_t - 1e12)
        return cnt, last

    n = (a.eval_batches or 10 ** 9) * a.batch_size
    tr = np.flatnonzero(split.train)
    rng = np.random.default_rng(a.seed)
    parts = [("train", tr[:n], tr, NegativeSampler(data, split.train)),
             ("val", np.flatnonzero(split.val)[:n], np.arange(data.num_edges), NegativeSampler(data)),
             ("test", np.flatnonzero(split.test)[:n], np.arange(data.num_edges), NegativeSampler(data))]
    print("| links | pos dst with history | neg with history | AP has-history | "
          "AP log-degree | AP recency |")
    print("|---|---|---|---|---|---|")
    for name, rows, graph_rows, negs in parts:
        t = data.ts[rows].astype(np.float64)
        neg = negs(len(rows), rng)
        y = np.r_[np.ones(len(t)), np.zeros(len(t))]
        cp, lp = past(graph_rows, data.dst[rows], t)
        cn, ln = past(graph_rows, neg, t)
        print(f"| {name} (first {len(rows)}) | {np.mean(cp > 0):.2f} | {np.mean(cn > 0):.2f} | "
              f"{average_precision_score(y, np.r_[cp > 0, cn > 0]):.3f} | "
              f"{average_precision_score(y, np.r_[np.log1p(cp), np.log1p(cn)]):.3f} | "
              f"{average_precision_score(y, np.r_[lp - t, ln - t]):.3f} |")


def describe(a: argparse.Namespace) -> str:
    d = {k: getattr(a, k) for k in ABLATION_KEYS}
    ref = vars(parse_args([]))
    diff = [f"{k}={v}" for k, v in d.items() if v != ref[k]]
    return ",".join(diff) or "baseline"


def main(argv=None) -> List[Dict[str, Any]]:
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    data = load_dataset(a.data, a.data_dir)
    if a.feat_dim:
        from dataclasses import replace
        data = replace(data, edge_feat=np.zeros((data.num_edges, a.feat_dim), np.float32),
                       node_feat=np.zeros((data.num_nodes, a.feat_dim), np.float32))
    split = chronological_split(data, seed=a.seed)
    print(f"[{data.name}] {data.num_edges} events, {data.num_nodes} nodes | {split.summary()}")
    if a.heuristics:
        heuristics(data, split, a)
        return []
    variants = [None] if a.ablations is None else a.ablations.split(",")
    results = []
    for var in variants:
        va = argparse.Namespace(**vars(a))
        if var and var != "baseline":
            k, v = var.split("=", 1)
            k = k.replace("-", "_")
            cur = getattr(va, k)
            setattr(va, k, type(cur)(v) if cur is not None else v)
        name = describe(va)
        for al in a.alpha.split(","):
            alpha = al if al == "learn" else float(al)  # 'learn': the learned gate
            print(f"[{data.name}] {name}: alpha={alpha}")
            r = run_curve(va, data, split, alpha)
            r["variant"] = name
            results.append(r)
    steps = [c["step"] for c in results[0]["curve"]]
    print(f"\n[{data.name}] val AP / test AP (pooled) after N steps; epoch = first "
          f"{a.epoch_batches or 'all'} training batches; eval on first {a.eval_batches or 'all'} batches")
    print("| variant | alpha | params | " + " | ".join(f"{s}" for s in steps) + " |")
    print("|---|---|---|" + "---|" * len(steps))
    for r in results:
        cells = " | ".join(f"{c['val_ap']:.3f} / {c['test_ap']:.3f}" for c in r["curve"])
        print(f"| {r['variant']} | {r['alpha']} | {r['parameters']} | {cells} |")
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps({"args": vars(a), "results": results}, indent=1))
    return results


if __name__ == "__main__":
    main()
