"""Where a data-parallel step's time goes: per-step timings of one process, N independent
processes and N DDP ranks of ``examples/train_wikipedia.py`` (issue 11's scaling question).

    python scripts/ddp_step_times.py --procs 8 --json out.json -- \
        --data-dir .gpudata --no-download --max-batches 20

Every process (one alone; N one-process trainings started together, seeds 0..N-1; a
``torchrun`` run of N ranks with a global batch of N x ``--events-per-proc``) records, for
every training step: the forward pass (the trainer's ``_embed``), the local backward pass
(until the last gradient bucket is ready, read from a DDP communication hook that then runs
DDP's own averaging all-reduce), the wait after it (the all-reduce and the slowest rank),
and the optimizer step.  The summary gives per-step means and, for the DDP ranks, the mean
over steps of the slowest rank's compute against the mean rank's: what waiting for the
slowest rank costs when every rank's step time jitters independently.

Diagnostic only: it patches the trainer's methods in its worker processes.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WORKER_ENV = "TBDFS_STEP_TIMES_OUT"
WARMUP_STEPS = 2  # the first steps pay one-off costs (allocations, DDP's bucket rebuild)


def _worker(argv: List[str]) -> None:
    """Run train_wikipedia.main(argv) with timing hooks; write this rank's step times."""
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    sys.path.insert(0, str(ROOT / "examples"))
    import train_wikipedia
    from tbdfs_dgl.linkpred import distributed, trainer

    rec: Dict[str, List[float]] = {"forward": [], "local_backward": [], "wait": [], "optimizer": []}
    marks: Dict[str, float] = {}

    def hook(group, bucket):  # unannotated: DDP checks a hook's annotations
        # DDP's default: average the bucket over the ranks (the hook only notes the time).
        marks["ready"] = time.perf_counter()
        work = torch.distributed.all_reduce(bucket.buffer().div_(group.size()), group=group,
                                            async_op=True)
        return work.get_future().then(lambda f: f.value()[0])

    wrap = distributed.wrap

    def timed_wrap(model: Any, embed: Any, device: Any) -> Any:
        ddp = wrap(model, embed, device)
        ddp.register_comm_hook(torch.distributed.group.WORLD, hook)
        return ddp

    trainer.distributed.wrap = timed_wrap
    embed = trainer.LinkPredictionTrainer._embed

    def timed_embed(self: Any, *a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        out = embed(self, *a, **k)
        if torch.is_grad_enabled():
            rec["forward"].append(time.perf_counter() - t)
        return out

    trainer.LinkPredictionTrainer._embed = timed_embed
    backward = torch.Tensor.backward

    def timed_backward(self: torch.Tensor, *a: Any, **k: Any) -> None:
        marks.pop("ready", None)
        t = time.perf_counter()
        backward(self, *a, **k)
        end = time.perf_counter()
        ready = marks.get("ready", end)  # no DDP: nothing to wait for
        rec["local_backward"].append(ready - t)
        rec["wait"].append(end - ready)
        marks["backward_end"] = end

    torch.Tensor.backward = timed_backward
    register_optimizer_step_post_hook(
        lambda *_: rec["optimizer"].append(time.perf_counter() - marks["backward_end"]))
    try:
        train_wikipedia.main(argv)
    finally:
        rank = os.environ.get("RANK", "0")
        Path(os.environ[WORKER_ENV] + f".{rank}.json").write_text(json.dumps(rec))


def _summary(paths: List[Path]) -> Dict[str, Any]:
    recs = [json.loads(p.read_text()) for p in paths]
    steps = min(len(r["optimizer"]) for r in recs)
    cut = WARMUP_STEPS if steps > WARMUP_STEPS else 0

    def arr(key: str) -> np.ndarray:  # [processes, steps], milliseconds
        return 1e3 * np.array([r[key][cut:steps] for r in recs])

    parts = {k: arr(k) for k in ("forward", "local_backward", "wait", "optimizer")}
    compute = parts["forward"] + parts["local_backward"]
    total = sum(parts.values())
    return {"processes": len(recs), "steps_timed": steps - cut,
            **{f"{k}_ms": round(float(v.mean()), 1) for k, v in parts.items()},
            "step_ms": round(float(total.mean()), 1),
            "compute_ms_per_process": [round(float(x), 1) for x in compute.mean(1)],
            "compute_cv_over_steps": round(float((compute.std(1) / compute.mean(1)).mean()), 3),
            "slowest_rank_compute_ms": round(float(compute.max(0).mean()), 1)}


def main() -> None:
    if os.environ.get(WORKER_ENV):
        return _worker(sys.argv[1:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--events-per-proc", type=int, default=200)
    p.add_argument("--json", default=None, help="write the summary here too")
    p.add_argument("--skip", default="", help="comma list of alone,independent,ddp to skip")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="-- train_wikipedia.py arguments")
    args = p.parse_args()
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    me = [sys.executable, str(Path(__file__).resolve())]
    common = ["--no-progress", "--epochs", "1", *rest]
    out: Dict[str, Any] = {"procs": args.procs, "events_per_proc": args.events_per_proc,
                           "train_wikipedia": rest}
    skip = set(args.skip.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        runs = {"alone": 1, "independent": args.procs, "ddp": args.procs}
        for name, n in runs.items():
            if name in skip:
                continue
            stem = str(Path(tmp) / name)
            e = dict(env, **{WORKER_ENV: stem})
            t0 = time.perf_counter()
            if name == "ddp":
                cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                       f"--nproc_per_node={n}", *me[1:], *common, "--save-dir", stem + "_d",
                       "--batch-size", str(n * args.events_per_proc)]
                subprocess.run(cmd, check=True, env=e, stdout=subprocess.DEVNULL)
            else:
                procs = [subprocess.Popen([*me, *common, "--save-dir", f"{stem}_d{i}", "--seed",
                                           str(i), "--batch-size", str(args.events_per_proc)],
                                          env=dict(e, RANK=str(i)), stdout=subprocess.DEVNULL)
                         for i in range(n)]
                if any(pr.wait() for pr in procs):
                    raise SystemExit(f"error: a {name} process failed")
            out[name] = _summary([Path(f"{stem}.{i}.json") for i in range(n)])
            out[name]["wall_s"] = round(time.perf_counter() - t0, 1)
            print(name, json.dumps(out[name]), flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
