"""DyGLib's TGAT under the protocol of ``scripts/learning_curve.py`` (issue 14's reference).

DyGLib (Yu et al., "Towards Better Dynamic Graph Learning", NeurIPS 2023,
https://github.com/yule-BUAA/DyGLib) is NOT part of this repository and this script does not
fetch it: check it out yourself, outside the repository, and pass its folder::

    git clone https://github.com/yule-BUAA/DyGLib /tmp/dyglib        # or any copy of it
    OMP_NUM_THREADS=1 python scripts/dyglib_tgat_curve.py --dyglib /tmp/dyglib \
        --data collegemsg --steps 0,10,20,40

What it does: converts our dataset to DyGLib's processed format in ``--workdir`` (default a
fresh temporary folder outside the repository): ``processed_data/<name>/ml_<name>.csv``
(columns ``u,i,ts,label,idx``; node ids shifted by +1, DyGLib keeps 0 for padding; edge ids
1..E), ``ml_<name>.npy`` (``(E+1) x 172`` zero edge features) and ``ml_<name>_node.npy``
(``(N+1) x 172`` zero node features); then loads it with DyGLib's own
``get_link_prediction_data`` (70/15/15 by time quantile, the same boundaries as ours),
builds ``TGAT`` + ``MergeLayer`` exactly as DyGLib's ``train_link_prediction.py`` does with
its best CollegeMsg configuration (20 recent neighbours, 2 layers, 2 heads, time dim 100,
dropout 0.1, batch 200, Adam lr 1e-4, BCE mean over pos+neg, random negatives among the
training destinations) and trains step by step: step ``s`` uses training batch
``s % --epoch-batches``.  After each step count in ``--steps`` it scores the first
``--eval-batches`` batches of DyGLib's validation and test sets with its seeded negative
samplers (seed 0 and 2, reset before every evaluation, as DyGLib does).

Prints val/test AP pooled over all scored links ("AP") and averaged over batches ("bAP",
what DyGLib logs).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def convert(data, workdir: Path, name: str, width: int = 172) -> None:
    """Write ``data`` in DyGLib's processed format under ``workdir/processed_data/name``."""
    import pandas as pd

    out = workdir / "processed_data" / name
    out.mkdir(parents=True, exist_ok=True)
    E = data.num_edges
    df = pd.DataFrame({"u": data.src.astype(np.int64) + 1, "i": data.dst.astype(np.int64) + 1,
                       "ts": data.ts.astype(np.float64), "label": np.zeros(E, np.int64),
                       "idx": np.arange(1, E + 1)})
    df.to_csv(out / f"ml_{name}.csv")
    np.save(out / f"ml_{name}.npy", np.zeros((E + 1, width), np.float32))
    np.save(out / f"ml_{name}_node.npy", np.zeros((data.num_nodes + 1, width), np.float32))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dyglib", required=True, help="folder of a DyGLib checkout")
    p.add_argument("--data", default="collegemsg")
    p.add_argument("--data-dir", default=None,
                   help="dataset folder (default: tbdfs_dgl.data.default_data_dir(), i.e. "
                        "$TBDFS_DATA_DIR, else ../shared/data)")
    p.add_argument("--workdir", default=None, help="where the converted data goes "
                   "(default: a new temporary folder)")
    p.add_argument("--steps", default="0,10,20,40",
                   help="evaluate after these steps; 'eN' is N whole epochs of "
                        "--epoch-batches batches (all training batches with 0)")
    p.add_argument("--epoch-batches", type=int, default=20)
    p.add_argument("--eval-batches", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu or cuda (DyGLib's device argument)")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)

    from tbdfs_dgl.data import load_dataset

    data = load_dataset(a.data, a.data_dir)
    name = data.name.lower().replace(" ", "_")
    workdir = Path(a.workdir or tempfile.mkdtemp(prefix="dyglib_"))
    convert(data, workdir, name)
    print(f"converted {data.name} to {workdir}/processed_data/{name}")

    sys.path.insert(0, str(Path(a.dyglib).resolve()))
    os.chdir(workdir)  # DyGLib reads ./processed_data/<name>/
    # DyGLib calls random.sample(set, k), which Python >= 3.11 refuses; Python <= 3.10 took
    # tuple(set) (deprecated since 3.9), which is what this shim does -- same draw.
    import random
    _sample = random.sample
    random.sample = lambda pop, k, **kw: _sample(
        tuple(pop) if isinstance(pop, (set, frozenset)) else pop, k, **kw)
    from models.TGAT import TGAT
    from models.modules import MergeLayer
    from sklearn.metrics import average_precision_score
    from utils.DataLoader import get_link_prediction_data
    from utils.utils import NegativeEdgeSampler, get_neighbor_sampler, set_random_seed

    node_f, edge_f, full, train, val, test, _, _ = get_link_prediction_data(
        dataset_name=name, val_ratio=0.15, test_ratio=0.15)
    train_ns = get_neighbor_sampler(train, "recent", time_scaling_factor=1e-6, seed=0)
    full_ns = get_neighbor_sampler(full, "recent", time_scaling_factor=1e-6, seed=1)
    train_neg = NegativeEdgeSampler(train.src_node_ids, train.dst_node_ids)
    eval_neg = {"val": (val, NegativeEdgeSampler(full.src_node_ids, full.dst_node_ids, seed=0)),
                "test": (test, NegativeEdgeSampler(full.src_node_ids, full.dst_node_ids, seed=2))}

    set_random_seed(a.seed)
    backbone = TGAT(node_raw_features=node_f, edge_raw_features=edge_f, neighbor_sampler=train_ns,
                    time_feat_dim=100, num_layers=2, num_heads=2, dropout=0.1, device=a.device)
    predictor = MergeLayer(input_dim1=node_f.shape[1], input_dim2=node_f.shape[1],
                           hidden_dim=node_f.shape[1], output_dim=1)
    model = torch.nn.Sequential(backbone, predictor).to(a.device)
    n_params = sum(q.numel() for q in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, weight_decay=0.0)
    loss_func = torch.nn.BCELoss()
    bs = 200

    def scores(d, idx, neg_dst):
        src, dst, t = d.src_node_ids[idx], d.dst_node_ids[idx], d.node_interact_times[idx]
        hs, hd = backbone.compute_src_dst_node_temporal_embeddings(src, dst, t, num_neighbors=20)
        ns, nd = backbone.compute_src_dst_node_temporal_embeddings(src, neg_dst, t, num_neighbors=20)
        pos = predictor(input_1=hs, input_2=hd).squeeze(-1).sigmoid()
        neg = predictor(input_1=ns, input_2=nd).squeeze(-1).sigmoid()
        return pos, neg

    @torch.no_grad()
    def evaluate(part):
        d, sampler = eval_neg[part]
        sampler.reset_random_state()
        backbone.set_neighbor_sampler(full_ns)
        model.eval()
        ps, ns, baps = [], [], []
        n = len(d.src_node_ids)
        nb = (n + bs - 1) // bs
        for b in range(min(nb, a.eval_batches) if a.eval_batches else nb):
            idx = np.arange(b * bs, min(n, (b + 1) * bs))
            _, neg_dst = sampler.sample(size=len(idx))
            pos, neg = scores(d, idx, neg_dst)
            y = np.r_[np.ones(len(idx)), np.zeros(len(idx))]
            baps.append(average_precision_score(y, torch.cat([pos, neg]).cpu().numpy()))
            ps.append(pos.cpu().numpy())
            ns.append(neg.cpu().numpy())
        p_, n_ = np.concatenate(ps), np.concatenate(ns)
        ap = average_precision_score(np.r_[np.ones(len(p_)), np.zeros(len(n_))], np.r_[p_, n_])
        backbone.set_neighbor_sampler(train_ns)
        model.train()
        return float(ap), float(np.mean(baps))

    n_train = len(train.src_node_ids)
    n_batches = (n_train + bs - 1) // bs
    per = min(a.epoch_batches, n_batches) if a.epoch_batches else n_batches
    curve, step, t0 = [], 0, time.perf_counter()
    print(f"DyGLib TGAT on {name}: {n_params} parameters; train {n_train} val "
          f"{len(val.src_node_ids)} test {len(test.src_node_ids)}")
    model.train()
    losses = []
    train_seconds = 0.0  # optimiser steps only (sampling included), not the evaluations
    targets = sorted({int(s[1:]) * per if s.startswith("e") else int(s)
                      for s in a.steps.split(",") if s})
    for target in targets:
        while step < target:
            t_step = time.perf_counter()
            b = step % per
            idx = np.arange(b * bs, min(n_train, (b + 1) * bs))
            _, neg_dst = train_neg.sample(size=len(idx))
            pos, neg = scores(train, idx, neg_dst)
            loss = loss_func(input=torch.cat([pos, neg]),
                             target=torch.cat([torch.ones_like(pos), torch.zeros_like(neg)]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss))  # also waits for the device, so the time is right
            step += 1
            train_seconds += time.perf_counter() - t_step
        v, te = evaluate("val"), evaluate("test")
        row = {"step": step, "val_ap": v[0], "val_bap": v[1], "test_ap": te[0], "test_bap": te[1],
               "train_bce": float(np.mean(losses[-10:])) if losses else float("nan"),
               "seconds": time.perf_counter() - t0, "train_seconds": train_seconds}
        curve.append(row)
        print(f"  DyGLib TGAT step {step:4d} | val AP {v[0]:.3f} (bAP {v[1]:.3f}) | test AP "
              f"{te[0]:.3f} (bAP {te[1]:.3f}) | train BCE(last10) {row['train_bce']:.3f} | "
              f"{row['seconds']:.0f}s (training {train_seconds:.0f}s)", flush=True)
        if a.json:  # after every row, so a long run stopped early keeps what it measured
            Path(a.json).write_text(json.dumps({"args": vars(a), "curve": curve,
                                                "losses": losses}, indent=1))
    print("| model | params | " + " | ".join(str(c["step"]) for c in curve) + " |")
    print("|---|---|" + "---|" * len(curve))
    print(f"| DyGLib TGAT | {n_params} | " +
          " | ".join(f"{c['val_ap']:.3f} / {c['test_ap']:.3f}" for c in curve) + " |")


if __name__ == "__main__":
    main()
