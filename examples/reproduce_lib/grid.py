"""What to run: datasets, model variants, budgets, and the grid of (dataset, variant, seed)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = ["DATASETS", "VARIANTS", "MAIN_METHODS", "ABLATIONS", "SWEEP_ALPHAS", "Variant",
           "Budget", "BUDGETS", "REPORTED_BUDGETS", "LEGACY_SETTINGS", "RunSpec",
           "sweep_variant", "make_grid", "variant_by_name"]

#: Datasets of the grid, in table order.  ``synthetic`` is make_wikipedia_like's path-pattern
#: graph (generated, never mistake it for a benchmark).
DATASETS: Tuple[str, ...] = ("wikipedia", "collegemsg", "email-eu", "bitcoin-otc", "synthetic")

#: How each dataset is described in the report.
DATASET_NOTES: Dict[str, str] = {
    "wikipedia": "JODIE Wikipedia edge list (no edge features, no labels)",
    "collegemsg": "SNAP CollegeMsg",
    "email-eu": "SNAP email-Eu-core-temporal",
    "bitcoin-otc": "SNAP Bitcoin OTC, rating as a 1-dim edge feature",
    "synthetic": "SYNTHETIC: make_wikipedia_like(num_users=1000, num_pages=200, "
                 "num_events=20000, path_strength=0.6, seed=0)",
}


@dataclass(frozen=True)
class Variant:
    """A model variant: a name, a label for tables and the TBDFSModel arguments it changes."""

    name: str
    label: str
    kwargs: Tuple[Tuple[str, Any], ...]
    description: str = ""

    @property
    def model_kwargs(self) -> Dict[str, Any]:
        return dict(self.kwargs)

    @property
    def alpha(self) -> Any:
        return self.model_kwargs.get("alpha", 0.5)


def _v(name: str, label: str, desc: str, **kw: Any) -> Variant:
    kw.setdefault("alpha", 0.5)
    return Variant(name, label, tuple(sorted(kw.items())), desc)


#: The variants of the main grid, in table order.
VARIANTS: Dict[str, Variant] = {v.name: v for v in [
    _v("tbdfs", "tBDFS", "alpha = 0.5 (the paper's model)", alpha=0.5),
    _v("tgat", "TGAT", "alpha = 1 (BFS only: exactly TGAT)", alpha=1.0),
    _v("dfs", "DFS only", "alpha = 0 (path branch only)", alpha=0.0),
    _v("path-avg", "path-avg", "mean instead of attention along each path",
       within_path_agg="mean"),
    _v("paths-avg", "paths-avg", "mean instead of attention over a root's paths",
       across_paths_agg="mean"),
    _v("no-time", "-time", "no time encoding (use_time=False, inclusive sampling)",
       use_time=False),
    _v("learned-alpha", "learned alpha", "alpha = per-root learned gate", alpha="learn"),
    _v("official-inputs", "official inputs",
       "path nodes fed BFS-layer embeddings (path_inputs='bfs', the official code)",
       path_inputs="bfs"),
]}

#: Columns of the main (paper-layout) tables and of the ablation table.
MAIN_METHODS: Tuple[str, ...] = ("tgat", "dfs", "tbdfs", "learned-alpha")
ABLATIONS: Tuple[str, ...] = ("tbdfs", "path-avg", "paths-avg", "no-time", "official-inputs",
                              "learned-alpha", "dfs", "tgat")

#: The alpha sweep (the paper's Figure 2): 0, 0.1, ..., 1.
SWEEP_ALPHAS: Tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(11))


def sweep_variant(alpha: float) -> Variant:
    """The variant for one sweep point; 0, 0.5 and 1 are the main grid's dfs, tbdfs, tgat
    (the same runs, so they are trained once and shared)."""
    alpha = round(float(alpha), 3)
    shared = {0.0: "dfs", 0.5: "tbdfs", 1.0: "tgat"}
    if alpha in shared:
        return VARIANTS[shared[alpha]]
    return _v(f"alpha-{alpha:g}", f"alpha={alpha:g}", f"alpha = {alpha:g}", alpha=alpha)


def variant_by_name(name: str) -> Variant:
    """A main-grid variant or a sweep point ``alpha-<value>``."""
    if name in VARIANTS:
        return VARIANTS[name]
    if name.startswith("alpha-"):
        return sweep_variant(float(name[len("alpha-"):]))
    raise KeyError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)} or alpha-<x>")


#: Budget settings added after the first reports, with the value every earlier run had.
LEGACY_SETTINGS: Dict[str, Any] = {"strategy": "recent", "time_encoding": "cos_sin",
                                   "train_negatives": "all", "attn_norm": False,
                                   "empty_neighbourhood": "zero"}


@dataclass(frozen=True)
class Budget:
    """How much work each run does.  Everything here is recorded with every run."""

    name: str
    epochs: int
    patience: int
    seeds: int                      # seeds of the main grid (0..seeds-1)
    sweep_seeds: int                # seeds of the alpha sweep (the first ones of the main)
    max_events: Optional[int]       # keep the first N interactions of each dataset (time order)
    max_batches: Optional[int]      # cap per epoch and per evaluation (the trainer's)
    # Whole-graph budgets: random training batches per epoch, random val/test interactions
    # (TrainConfig.train_batches / val_events / test_events).
    train_batches: Optional[int] = None
    val_events: Optional[int] = None
    test_events: Optional[int] = None
    # Evaluation negatives (TrainConfig.eval_negatives / eval_candidates): DyGLib's
    # 'random', 'historical' or 'inductive', K per positive (K > 1 adds MRR and Hits@k).
    eval_negatives: str = "random"
    eval_candidates: int = 1
    batch_size: int = 200
    lr: float = 1e-4
    fanouts: Tuple[int, ...] = (10, 10)
    strategy: str = "recent"
    # The model's time encoding and the training negatives (TBDFSModel(time_encoding=),
    # TrainConfig.train_negatives).  Release 0.1's 'cos_sin' for the budgets whose reports
    # were made with it; the full budgets use the library's current default, 'cos_phase'
    # (docs/learning_efficiency.md).  'all' (TGAT's negatives) everywhere by default.
    time_encoding: str = "cos_sin"
    train_negatives: str = "all"
    # The BFS layers' form (TBDFSModel(attn_norm=)): TGAT's (False) for every budget so far,
    # whatever the library's default, so that their grids stay one formulation.  True is
    # the library's default since round 9 (attn_dim = hidden_dim + time_dim, torch init).
    attn_norm: bool = False
    # What a BFS destination without eligible neighbours attends to
    # (TBDFSModel(empty_neighbourhood=)): nothing ('zero') for every budget so far, for the
    # same reason.
    empty_neighbourhood: str = "zero"
    hidden_dim: int = 100
    time_dim: int = 100
    num_heads: int = 2
    dropout: float = 0.1
    sweep_datasets: Tuple[str, ...] = ("collegemsg", "synthetic")
    description: str = ""

    def settings(self) -> Dict[str, Any]:
        d = asdict(self)
        d["fanouts"] = list(self.fanouts)
        d["sweep_datasets"] = list(self.sweep_datasets)
        # Settings at the value every record had before they could change are left out,
        # so that records match those made before.
        if (self.eval_negatives, self.eval_candidates) == ("random", 1):
            del d["eval_negatives"], d["eval_candidates"]
        for k, legacy in LEGACY_SETTINGS.items():
            if d[k] == legacy:
                del d[k]
        return d


BUDGETS: Dict[str, Budget] = {
    "smoke": Budget(
        "smoke", epochs=1, patience=1, seeds=1, sweep_seeds=1, max_events=1500, max_batches=2,
        batch_size=50, hidden_dim=16, time_dim=16,
        description="pipeline check only (tests/CI): a tiny model, 2 batches of 50 per epoch "
                    "and per evaluation; the numbers mean nothing"),
    "session": Budget(
        "session", epochs=5, patience=2, seeds=5, sweep_seeds=2, max_events=2000,
        max_batches=None,
        description="the whole default grid in about 2 hours on 2 CPU cores: the first 2000 "
                    "interactions of each dataset (split 70/15/15 by time within them), at "
                    "most 5 epochs with patience 2, 5 seeds (2 for the alpha sweep), the "
                    "paper's model and optimiser settings otherwise; validation and test "
                    "are evaluated in full"),
    "graphs": Budget(
        "graphs", epochs=5, patience=2, seeds=5, sweep_seeds=2, max_events=None,
        max_batches=None, train_batches=12, val_events=1000, test_events=2000,
        time_encoding="cos_phase",
        description="every interaction of each graph (split 70/15/15 by time; every query "
                    "samples from the whole history before it), but each epoch trains on 12 "
                    "randomly drawn training batches of 200 (a fresh draw per epoch, kept in "
                    "time order), validation scores 1000 and test 2000 randomly drawn "
                    "interactions of their part (one fixed draw per seed); at most 5 epochs "
                    "with patience 2, 5 seeds (2 for the alpha sweep); the paper's optimiser "
                    "(lr 1e-4) and model settings, with the library's current time encoding "
                    "cos(w dt + b) (until round 6 this budget used release 0.1's encoding, "
                    "which needed lr 1e-3 to learn anything in 60 steps; those results are "
                    "kept in docs/graphs/release-0.1_lr1e-3/)"),
    "full": Budget(
        "full", epochs=50, patience=5, seeds=5, sweep_seeds=5, max_events=None,
        max_batches=None, fanouts=(20, 20), strategy="uniform", time_encoding="cos_phase",
        description="the paper's protocol: every interaction of each graph, up to 50 epochs "
                    "with early stopping (patience 5) on validation AP (all of it, every "
                    "epoch), lr 1e-4, batch 200, 20 uniformly sampled neighbours per hop "
                    "(the paper's sampler), training negatives uniform among training "
                    "destinations, 5 seeds; the library's current model (cos(w dt + b) "
                    "time encoding)"),
}
BUDGETS["full-recent"] = replace(
    BUDGETS["full"], name="full-recent", fanouts=(10, 10), strategy="recent",
    description="the paper's protocol as the full budget, with this library's default "
                "sampler instead of the paper's: the 10 most recent neighbours per hop")

#: Budgets whose reports are committed under docs/<name>/ (the session budget's in docs/).
REPORTED_BUDGETS: Tuple[str, ...] = ("graphs", "full", "full-recent")


def with_overrides(budget: Budget, **overrides: Any) -> Budget:
    """``budget`` with the non-None overrides applied; its name records them, so runs made
    with different settings are never mixed under one budget."""
    changed = {k: v for k, v in overrides.items() if v is not None and getattr(budget, k) != v}
    if not changed:
        return budget
    tag = ",".join(f"{k}={'-'.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
                   for k, v in sorted(changed.items()))
    return replace(budget, name=f"{budget.name}[{tag}]", **changed)


@dataclass(frozen=True)
class RunSpec:
    """One run of the grid."""

    dataset: str
    variant: Variant
    seed: int
    budget: Budget
    sections: Tuple[str, ...] = field(default=("main",), compare=False)

    @property
    def key(self) -> Tuple[str, str, int, str]:
        return (self.dataset, self.variant.name, int(self.seed), self.budget.name)

    def describe(self) -> str:
        return f"{self.dataset}/{self.variant.name}/seed{self.seed}"


def make_grid(budget: Budget, datasets: Sequence[str] = DATASETS,
              variants: Sequence[str] = tuple(VARIANTS), seeds: Optional[Sequence[int]] = None,
              sweep: bool = True, sweep_datasets: Optional[Sequence[str]] = None,
              sweep_seeds: Optional[int] = None) -> List[RunSpec]:
    """The main grid (datasets x variants x seeds) and the alpha sweep, without duplicates,
    seed by seed (all of seed 0's runs, main grid first, then seed 1's, ...).

    ``seeds`` replaces the budget's seeds (``0..budget.seeds-1``); the sweep uses the first
    ``sweep_seeds`` (default: the budget's) of them.  The sweep runs on ``sweep_datasets``
    (default the budget's) that are also in ``datasets``; sweep points 0, 0.5 and 1 are the
    main grid's dfs, tbdfs and tgat runs.
    """
    seed_list = list(range(budget.seeds)) if seeds is None else [int(s) for s in seeds]
    specs: Dict[Tuple[str, str, int, str], RunSpec] = {}
    for d in datasets:
        for v in variants:
            for s in seed_list:
                spec = RunSpec(d, variant_by_name(v), s, budget, ("main",))
                specs.setdefault(spec.key, spec)
    if sweep:
        n = budget.sweep_seeds if sweep_seeds is None else sweep_seeds
        sd = budget.sweep_datasets if sweep_datasets is None else sweep_datasets
        for d in [x for x in sd if x in datasets]:
            for a in SWEEP_ALPHAS:
                for s in seed_list[:n]:
                    spec = RunSpec(d, sweep_variant(a), s, budget, ("sweep",))
                    if spec.key in specs:
                        old = specs[spec.key]
                        specs[spec.key] = replace(old, sections=old.sections + ("sweep",))
                    else:
                        specs[spec.key] = spec
    # Seed-major order: an interrupted grid has every cell with the first seeds rather than
    # some cells with all seeds and others with none (the report's t-tests need >= 2 seeds).
    order = {s: i for i, s in enumerate(seed_list)}
    return sorted(specs.values(), key=lambda sp: (order[sp.seed], "main" not in sp.sections))
