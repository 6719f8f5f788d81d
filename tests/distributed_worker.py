"""One rank of the DDP equivalence test (tests/test_distributed.py), run as a subprocess
with torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT).

Trains ``--steps`` global batches on a small synthetic graph and evaluates 'val'; writes
this rank's parameters, the epoch loss and the validation metrics to ``--out``.rank<r>.pt.
"""
import argparse
import sys

import torch

from tbdfs_dgl import TBDFSModel
from tbdfs_dgl.data import make_wikipedia_like
from tbdfs_dgl.linkpred import LinkPredictionTrainer, TrainConfig
from tbdfs_dgl.linkpred.distributed import init_from_env
from tbdfs_dgl.nn.time_encoder import TimeEncoder
from tbdfs_dgl.seeding import seed_everything


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=51)  # odd: uneven shares
    p.add_argument("--strategy", default="recent")
    # SGD: its steps are proportional to the gradients, which the test compares.  Adam's
    # first steps are lr * g / (|g| + 1e-8): float-level differences of near-zero
    # gradients (summation order) move such weights by up to ~lr.
    p.add_argument("--sgd", type=float, default=None, help="SGD with this learning rate")
    # The time encoders' phases w * dt grow with dt: float-level differences of w turn
    # into different encodings within a few steps.  Frozen, the rest is compared.
    p.add_argument("--freeze-time", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    ranks, device = init_from_env("cpu")
    data = make_wikipedia_like(num_users=200, num_pages=40, num_events=3000, seed=3,
                               edge_feat_dim=4)
    seed_everything(0)
    model = TBDFSModel(node_dim=data.node_dim, edge_dim=data.edge_dim, time_dim=8,
                       hidden_dim=16, num_layers=2, num_heads=2, dropout=0.0)
    if args.freeze_time:
        for m in model.modules():
            if isinstance(m, TimeEncoder):
                m.requires_grad_(False)
    cfg = TrainConfig(batch_size=args.batch_size, lr=1e-3, fanouts=(4, 4),
                      strategy=args.strategy, train_batches=args.steps, val_events=300,
                      progress=False, device=device)
    trainer = LinkPredictionTrainer(model, data, cfg, log=lambda line: None)
    if args.sgd is not None:
        trainer.optimizer = torch.optim.SGD(model.parameters(), lr=args.sgd)
    try:
        loss, _, _, batches = trainer.train_epoch(0)
        val = trainer.evaluate("val")
    finally:
        trainer.close()
    torch.save({"params": {k: v.detach().clone() for k, v in model.state_dict().items()},
                "grads": {k: p.grad.clone() for k, p in model.named_parameters()
                          if p.grad is not None},
                "loss": loss, "batches": batches, "val": val, "world_size": ranks.world_size,
                "mapped": trainer.train_sampler.graph.is_mapped},
               f"{args.out}.rank{ranks.rank}.pt")
    if ranks.distributed:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
