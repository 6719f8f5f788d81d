#!/usr/bin/env python
"""Train the same model twice with one seed — dense (the package) and the release-0.1 DGL
computation (``tbdfs_dgl._reference``) — and print both test APs.

The two share every parameter and sampled batch; they differ in floating-point order and in
how attention dropout is drawn along paths (per instance in the dense tree encoder, per path
slot in the reference), so their training runs drift apart: equal within noise is the claim.

    PYTHONPATH=. .venv/bin/python scripts/check_same_ap.py --dataset collegemsg --epochs 1
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tbdfs_dgl import TBDFSModel, seed_everything  # noqa: E402
from tbdfs_dgl.data import default_data_dir, load_dataset  # noqa: E402
from tbdfs_dgl.linkpred import LinkPredictionTrainer, TrainConfig  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="collegemsg")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--alpha", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--impls", default="dense,dgl")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    data = load_dataset(args.dataset, args.data_dir or default_data_dir())
    out = {}
    for impl in args.impls.split(","):
        seed_everything(args.seed)
        model = TBDFSModel(data.node_dim, data.edge_dim, 100, 100, alpha=args.alpha)
        if impl == "dgl":
            from tbdfs_dgl._reference import ReferenceModel

            model = ReferenceModel(model)
        cfg = TrainConfig(epochs=args.epochs, seed=args.seed, num_threads=1, progress=False)
        trainer = LinkPredictionTrainer(model, data, cfg, log=lambda s: print(f"[{impl}] {s}"))
        t0 = time.perf_counter()
        result = trainer.fit()
        trainer.close()
        out[impl] = {"test_ap": result.test["transductive"]["ap"],
                     "test_ap_inductive": result.test["inductive"]["ap"],
                     "val_ap": result.val["transductive"]["ap"],
                     "seconds": time.perf_counter() - t0}
        print(impl, json.dumps(out[impl]))
    print(json.dumps({"dataset": data.name, "alpha": args.alpha, "epochs": args.epochs,
                      "seed": args.seed, "runs": out}))


if __name__ == "__main__":
    main()
