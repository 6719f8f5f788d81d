"""Reproduce the tBDFS paper's link-prediction experiments on the graphs we have, resumably.

The grid is datasets x variants x seeds (plus an alpha sweep on two datasets), each run the
paper's protocol: chronological 70/15/15 split, one random negative per positive (or
``--eval-negatives``/``--eval-candidates``), early
stopping on validation AP, test with the best weights.  Every finished run appends one JSON
line to the results file (default ``docs/results/runs.jsonl``); a restart skips finished
runs, and a run stopped midway resumes after its last finished epoch (its training state
is saved after every epoch in ``resume/`` beside the results file; ``--no-resume`` turns
that off).  The report (``docs/results.md``, ``docs/alpha_sweep.png``,
``docs/training_curves.png``) is regenerated from the results file after every grid, or on
its own with ``--report-only``.

Examples
--------
The default grid at the session budget (first 2,000 interactions of each graph; about 2 h
on 2 cores, resumable)::

    python examples/reproduce.py --budget session

On whole graphs with a training budget (report in ``docs/graphs/``), on both cores::

    python examples/reproduce.py --budget graphs --shard 0/2 --threads 1 --no-report &
    python examples/reproduce.py --budget graphs --shard 1/2 --threads 1 --no-report
    python examples/reproduce.py --budget graphs --report-only

A seconds-long smoke run; part of the grid; only the report::

    python examples/reproduce.py --budget smoke --datasets synthetic --variants tbdfs,tgat
    python examples/reproduce.py --budget session --datasets collegemsg --seeds 0,1
    python examples/reproduce.py --budget session --report-only

Evaluate with DyGLib's historical negatives, each positive ranked against 49 candidates
(MRR and Hits@1/3/10 join the report's tables; the budget is then named
'graphs[eval_candidates=49,eval_negatives=historical]')::

    python examples/reproduce.py --budget graphs --eval-negatives historical --eval-candidates 49

How long a budget's grid would take on this machine (times a few batches per dataset)::

    python examples/reproduce.py --budget session --estimate
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
import traceback
from pathlib import Path
from typing import List, Optional, Set, Tuple

# --retain-memory also asks torch to put its tensors of 2 MB or more on transparent huge
# pages, a switch torch reads at its first allocation, so it is set before torch loads
# (tbdfs_dgl._malloc.huge_page_tensors; THP_MEM_ALLOC_ENABLE=0 keeps them off).
if "--retain-memory" in sys.argv[1:]:
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "examples"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from reproduce_lib.grid import (BUDGETS, DATASETS, REPORTED_BUDGETS, VARIANTS,  # noqa: E402
                                Budget, make_grid, variant_by_name, with_overrides)
from reproduce_lib.store import ResultsStore  # noqa: E402


def _csv(s: Optional[str]) -> Optional[List[str]]:
    return None if s is None else [x.strip() for x in s.split(",") if x.strip()]


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="budgets:\n" + "\n".join(
                                    f"  {b.name}: {b.description}" for b in BUDGETS.values()))
    p.add_argument("--budget", default="session", choices=list(BUDGETS))
    p.add_argument("--datasets", default=None,
                   help=f"comma list to run (default all: {','.join(DATASETS)})")
    p.add_argument("--variants", default=None,
                   help=f"comma list to run (default all: {','.join(VARIANTS)}; sweep points "
                        "are alpha-0.1 etc.); giving it turns the alpha sweep off unless "
                        "--sweep is given too")
    p.add_argument("--seeds", default=None,
                   help="comma list of seeds to run (default: 0..N-1, N the budget's)")
    p.add_argument("--num-seeds", type=int, default=None, help="seeds 0..N-1")
    sw = p.add_mutually_exclusive_group()
    sw.add_argument("--sweep", dest="sweep", action="store_true", default=None,
                    help="run the alpha sweep")
    sw.add_argument("--no-sweep", dest="sweep", action="store_false", help="skip the sweep")
    p.add_argument("--sweep-datasets", default=None,
                   help="datasets of the alpha sweep (default: the budget's)")
    o = p.add_argument_group("budget overrides (recorded in the budget's name, e.g. "
                             "'session[epochs=2]', so such runs are never mixed with others)")
    o.add_argument("--epochs", type=int, default=None)
    o.add_argument("--patience", type=int, default=None)
    o.add_argument("--max-batches", type=int, default=None)
    o.add_argument("--max-events", type=int, default=None)
    o.add_argument("--train-batches", type=int, default=None)
    o.add_argument("--val-events", type=int, default=None)
    o.add_argument("--test-events", type=int, default=None)
    o.add_argument("--eval-negatives", default=None,
                   choices=["random", "historical", "inductive"],
                   help="evaluation negatives (DyGLib's; default random, TGAT's)")
    o.add_argument("--eval-candidates", type=int, default=None,
                   help="negatives per positive K (default 1); K > 1 adds MRR and "
                        "Hits@1/3/10 to the results and the report")
    o.add_argument("--lr", type=float, default=None, help="learning rate")
    o.add_argument("--time-encoding", default=None,
                   choices=["cos_sin", "cos_sin_unscaled", "cos_phase"],
                   help="the model's time encoding (TBDFSModel(time_encoding=))")
    o.add_argument("--train-negatives", default=None, choices=["all", "active"],
                   help="training negatives (TrainConfig.train_negatives)")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="run only every N-th run of the grid, starting at the I-th (0-based): "
                        "N processes with 0/N .. N-1/N (e.g. with --threads 1 each) share the "
                        "grid and its results file, to use several cores")
    p.add_argument("--out-dir", default=None,
                   help="where results.md and the plots go (default: docs/ for the session "
                        "preset, docs/<budget>/ for graphs, full and full-recent; "
                        "runs/reproduce/<budget>/, which git ignores, for "
                        "smoke and for budgets with overrides, so they never overwrite the "
                        "committed report)")
    p.add_argument("--results", default=None,
                   help="results file (default: <out-dir>/results/runs.jsonl)")
    p.add_argument("--state-dir", default=None,
                   help="where each run in progress keeps its training state after every "
                        "epoch, so that a stopped run resumes there instead of starting over "
                        "(default: resume/ beside the results file; git ignores it)")
    p.add_argument("--no-resume", action="store_true",
                   help="neither save nor resume training states")
    p.add_argument("--in-progress", action="store_true",
                   help="only list the budget's runs in progress (their training states): "
                        "epochs done, best epoch and validation AP, hours so far")
    p.add_argument("--resume-other-code", action="store_true",
                   help="resume states that other package sources wrote (refused by "
                        "default); only after checking that the sources differ in nothing "
                        "the runs compute: their records name both versions")
    p.add_argument("--data-dir", default=None,
                   help="dataset folder (default $TBDFS_DATA_DIR, else ../shared/data)")
    p.add_argument("--report-only", action="store_true",
                   help="only regenerate the report from the results file")
    p.add_argument("--no-report", action="store_true", help="do not write the report")
    p.add_argument("--estimate", action="store_true",
                   help="time a few batches per dataset and extrapolate the grid's time")
    p.add_argument("--estimate-batches", type=int, default=2)
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    h = p.add_argument_group("hardware (recorded with each run, not part of its identity)")
    h.add_argument("--device", default="cpu", help="torch device of the model, e.g. cuda "
                   "(sampling stays on CPU threads)")
    h.add_argument("--compile", action="store_true", help="torch.compile the model")
    h.add_argument("--compile-mode", default=None,
                   help="torch.compile's mode with --compile, e.g. reduce-overhead (CUDA "
                        "graphs on a GPU)")
    h.add_argument("--amp", choices=["bf16"], default=None,
                   help="autocast the model's matrix products to bfloat16")
    h.add_argument("--retain-memory", action="store_true",
                   help="TrainConfig.retain_memory: glibc malloc keeps freed memory instead of "
                        "faulting batch-sized tensors in again (bounded), and torch's large "
                        "tensors go on huge pages (THP_MEM_ALLOC_ENABLE=1 unless set) (CPU "
                        "runs; ~6%% off a tBDFS step on email-Eu at full-recent's settings, "
                        "~1.6x on a TGAT step at full's; costs peak memory)")
    p.add_argument("--fail-fast", action="store_true", help="stop at the first failed run")
    p.add_argument("--quiet", action="store_true", help="no per-epoch lines")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p.parse_args(argv)


def build(args: argparse.Namespace):
    base = BUDGETS[args.budget]
    budget = with_overrides(base, epochs=args.epochs, patience=args.patience,
                            max_batches=args.max_batches, max_events=args.max_events,
                            train_batches=args.train_batches, val_events=args.val_events,
                            test_events=args.test_events, eval_negatives=args.eval_negatives,
                            eval_candidates=args.eval_candidates, lr=args.lr,
                            time_encoding=args.time_encoding,
                            train_negatives=args.train_negatives)
    if budget.eval_candidates < 1:
        raise SystemExit(f"error: --eval-candidates must be >= 1, got {budget.eval_candidates}")
    datasets = _csv(args.datasets) or list(DATASETS)
    for d in datasets:
        if d not in DATASETS:
            raise SystemExit(f"error: unknown dataset {d!r}; choose from {', '.join(DATASETS)}")
    variants = _csv(args.variants)
    for v in variants or []:
        try:
            variant_by_name(v)
        except KeyError as err:
            raise SystemExit(f"error: {err.args[0]}")
    seeds = None
    if args.num_seeds is not None:
        if args.num_seeds < 1:
            raise SystemExit(f"error: --num-seeds must be >= 1, got {args.num_seeds}")
        seeds = list(range(args.num_seeds))
    if args.seeds is not None:
        try:
            seeds = [int(x) for x in _csv(args.seeds)]
        except ValueError:
            seeds = []
        if not seeds or min(seeds) < 0:
            raise SystemExit(f"error: --seeds must be a comma list of integers >= 0, got "
                             f"{args.seeds!r}")
    sweep = args.sweep if args.sweep is not None else variants is None
    specs = make_grid(budget, datasets, variants or list(VARIANTS), seeds, sweep=sweep,
                      sweep_datasets=_csv(args.sweep_datasets))
    return budget, specs


def estimate(budget, specs, args) -> None:
    from reproduce_lib.runner import estimate_grid, measure_speed

    speeds = {}
    import os

    print(f"timing {args.estimate_batches} batches (after a warm-up batch) per dataset and "
          f"model family, budget {budget.name}; load average before: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    print("| dataset | family | train s/batch | eval s/batch | train CPU s/batch | "
          "eval CPU s/batch | setup s | batches/epoch (train/val/test) |")
    print("|---|---|---|---|---|---|---|---|")
    for d in dict.fromkeys(s.dataset for s in specs):
        fams = {"tgat" if s.variant.alpha == 1.0 else "tbdfs" for s in specs if s.dataset == d}
        for fam in sorted(fams):
            sp = measure_speed(d, budget, fam, args.estimate_batches, args.data_dir,
                               _hardware(args))
            speeds[(d, fam)] = sp
            print(f"| {d} | {fam} | {sp.train_s_per_batch:.3f} | {sp.eval_s_per_batch:.3f} | "
                  f"{sp.train_cpu_per_batch:.3f} | {sp.eval_cpu_per_batch:.3f} | "
                  f"{sp.setup_s:.2f} | {sp.train_batches}/{sp.val_batches}/{sp.test_batches} |",
                  flush=True)
    total, rows = estimate_grid(specs, speeds)
    cpu_total, cpu_rows = estimate_grid(specs, speeds, cpu=True)
    print(f"\nextrapolation, every run going all {budget.epochs} epochs (an upper bound; early "
          "stopping shortens it); wall time as measured now, and process CPU time (what the "
          "runs cost on an otherwise idle machine, before any gain from torch's second "
          "thread):")
    for (d, n, sec), (_, _, cs) in zip(rows, cpu_rows):
        print(f"  {d}: {n} runs, {sec / 60:.1f} min wall, {cs / 60:.1f} min CPU")
    print(f"  total: {len(specs)} runs, {total / 3600:.2f} h wall, {cpu_total / 3600:.2f} h CPU "
          f"(load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; other "
          "processes on the CPUs inflate the wall figures)")


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    budget, specs = build(args)
    out_dir = Path(args.out_dir) if args.out_dir else default_out_dir(budget.name)
    results = Path(args.results) if args.results else out_dir / "results" / "runs.jsonl"
    store = ResultsStore(results)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.estimate:
        estimate(budget, specs, args)
        return 0
    state_dir = Path(args.state_dir) if args.state_dir else results.parent / "resume"
    if args.in_progress:
        show_in_progress(budget, state_dir, {"/".join(map(str, key[:2])) + f"/seed{key[2]}"
                                             for key in store.done()})
        return 0
    failed = 0
    interrupted = False
    if not args.report_only:
        from reproduce_lib.runner import remove_state, run_one, state_path, unresumable_states

        hardware = _hardware(args)
        if args.shard:
            # A fixed share of the grid (not of what is pending), so shards started at
            # different times, or restarted, never overlap or leave runs out.
            index, count = _parse_shard(args.shard)
            specs = specs[index::count]
        done = store.done()
        todo = [s for s in specs if s.key not in done]
        if not args.no_resume:
            # A finished run's state left over (e.g. unpacked from a GPU machine's archive
            # after the run finished there) would never be resumed: delete it.
            for spec in specs:
                if spec.key in done:
                    remove_state(state_path(spec, state_dir))
            refused = unresumable_states(todo, state_dir, args.resume_other_code)
            if refused:
                for why in refused:
                    print(f"error: {why}", file=sys.stderr)
                print(f"{len(refused)} run(s) cannot resume (above); nothing was run",
                      file=sys.stderr)
                return 2
        bar = _bar(len(specs), len(specs) - len(todo), budget.name, args.no_progress)
        say = bar.write if hasattr(bar, "write") else print
        say(f"budget {budget.name}: {len(specs)} runs in the grid, {len(specs) - len(todo)} "
            f"already in {results}, {len(todo)} to run")
        log = (lambda line: None) if args.quiet else say
        try:
            for spec in todo:
                bar.set_postfix_str(spec.describe())
                resume = None if args.no_resume else state_path(spec, state_dir)
                try:
                    rec = run_one(spec, args.data_dir, log=log, hardware=hardware,
                                  resume=resume, other_code_ok=args.resume_other_code)
                except KeyboardInterrupt:
                    raise
                except Exception as err:  # noqa: BLE001 - keep the grid going, report it
                    if args.fail_fast:
                        raise
                    failed += 1
                    say(f"FAILED {spec.describe()}: {type(err).__name__}: {err}")
                    if not isinstance(err, FileNotFoundError):
                        say(traceback.format_exc())
                    bar.update(1)
                    continue
                store.append(rec)
                remove_state(resume)
                test = rec["test"]["transductive"]
                mrr = f", MRR {test['mrr']:.4f}" if "mrr" in test else ""
                say(f"done {spec.describe()}: test AP {test['ap']:.4f}{mrr}, "
                    f"{rec['epochs_run']} epochs (best {rec['best_epoch']}), "
                    f"{rec['wall_seconds']:.1f}s")
                bar.update(1)
        except KeyboardInterrupt:
            interrupted = True
            say("interrupted: finished runs are saved" + (
                "" if args.no_resume else f", the run in progress resumes from its last epoch "
                f"(states in {state_dir})") + "; rerun the same command to continue")
        finally:
            bar.close()
    if not args.no_report:
        from reproduce_lib.report import write_report

        t0 = time.perf_counter()
        paths = write_report(store.load(), budget.name, out_dir, results, budget.seeds,
                             command=_command(args))
        print(f"report written: {paths['report']} ({time.perf_counter() - t0:.1f}s), "
              f"{paths['alpha_sweep']}, {paths['training_curves']}")
    if interrupted:
        return 130
    if failed:
        print(f"{failed} run(s) failed; they are not in the results file and rerunning retries "
              "them", file=sys.stderr)
        return 1
    return 0


def show_in_progress(budget: Budget, state_dir: Path, finished: Set[str]) -> None:
    """Print one line per run of ``budget`` with a training state in ``state_dir``
    (``finished``: the runs already in the results file, as 'dataset/variant/seedS')."""
    from reproduce_lib.runner import runs_in_progress

    runs = runs_in_progress(budget, state_dir)
    print(f"budget {budget.name}: {len(runs)} run(s) in progress in {state_dir}")
    for r in runs:
        if "error" in r:
            print(f"  {r['run']}: unreadable ({r['error']})")
            continue
        last = "n/a" if r["last_val_ap"] is None else f"{r['last_val_ap']:.4f}"
        print(f"  {r['run']}: {r['epochs_done']} epoch(s) done, best {r['best_epoch']} (val AP "
              f"{r['best_val_ap']:.4f}), last val AP {last}, {r['seconds'] / 3600:.2f} h"
              + ("; only the final tests remain" if r["stopped"] else "")
              + ("; already in the results file (the next run of the grid deletes this "
                 "state)" if r["run"] in finished else ""))


def _hardware(args: argparse.Namespace):
    from reproduce_lib.runner import Hardware

    if args.compile_mode is not None and not args.compile:
        raise SystemExit("error: --compile-mode needs --compile")
    from tbdfs_dgl._malloc import huge_page_tensors

    return Hardware(device=args.device, compile=args.compile, amp=args.amp,
                    compile_mode=args.compile_mode, retain_memory=args.retain_memory,
                    huge_pages=huge_page_tensors())


def _parse_shard(text: str) -> Tuple[int, int]:
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise SystemExit(f"error: --shard must look like I/N (e.g. 0/2), got {text!r}")
    if n < 1 or not 0 <= i < n:
        raise SystemExit(f"error: --shard I/N needs 0 <= I < N, got {text!r}")
    return i, n


def default_out_dir(budget_name: str) -> Path:
    if budget_name == "session":
        return ROOT / "docs"
    if budget_name in REPORTED_BUDGETS:  # a report per preset: none overwrites another
        return ROOT / "docs" / budget_name
    safe = "".join(c if c.isalnum() or c in "-_.=," else "_" for c in budget_name)
    return ROOT / "runs" / "reproduce" / safe


def _command(args: argparse.Namespace) -> str:
    """The command line that regenerates this report."""
    parts = ["python", "examples/reproduce.py", "--budget", args.budget]
    for flag in ("epochs", "patience", "max_batches", "max_events", "train_batches",
                 "val_events", "test_events", "eval_negatives", "eval_candidates"):
        v = getattr(args, flag)
        if v is not None:
            parts += [f"--{flag.replace('_', '-')}", str(v)]
    if args.out_dir:
        parts += ["--out-dir", args.out_dir]
    if args.results:
        parts += ["--results", args.results]
    return " ".join(shlex.quote(p) for p in parts + ["--report-only"])


def _bar(total: int, initial: int, desc: str, disabled: bool):
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        tqdm = None
    if tqdm is None or disabled:
        class _Null:
            def update(self, n: int = 1) -> None: ...
            def set_postfix_str(self, s: str) -> None: ...
            def close(self) -> None: ...
        return _Null()
    return tqdm(total=total, initial=initial, desc=f"grid ({desc})", unit="run",
                dynamic_ncols=True)


if __name__ == "__main__":
    sys.exit(main())

