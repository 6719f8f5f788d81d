"""examples/reproduce.py: the smoke grid, resuming, the results file and the report."""
from __future__ import annotations

import json
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "examples"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import reproduce  # noqa: E402
from reproduce_lib import grid as G  # noqa: E402
from reproduce_lib import report as R  # noqa: E402
from reproduce_lib import runner  # noqa: E402
from reproduce_lib.store import ResultsStore  # noqa: E402
from tbdfs_dgl._malloc import huge_page_tensors  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def _lines(path: Path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


# ---------------------------------------------------------------------------- grid
def test_grid_sizes_and_sharing():
    b = G.BUDGETS["session"]
    specs = G.make_grid(b)
    keys = [s.key for s in specs]
    assert len(keys) == len(set(keys))
    main = len(G.DATASETS) * len(G.VARIANTS) * b.seeds
    sweep_own = len(b.sweep_datasets) * (len(G.SWEEP_ALPHAS) - 3) * b.sweep_seeds
    assert len(specs) == main + sweep_own
    # the sweep's 0 / 0.5 / 1 points are the main grid's dfs / tbdfs / tgat runs
    shared = [s for s in specs if "sweep" in s.sections and "main" in s.sections]
    assert {s.variant.name for s in shared} == {"dfs", "tbdfs", "tgat"}
    assert G.sweep_variant(0.3).model_kwargs["alpha"] == 0.3
    assert G.variant_by_name("alpha-0.3").name == "alpha-0.3"
    assert G.VARIANTS["tgat"].alpha == 1.0 and G.VARIANTS["dfs"].alpha == 0.0
    assert G.VARIANTS["no-time"].model_kwargs["use_time"] is False
    assert G.VARIANTS["official-inputs"].model_kwargs["path_inputs"] == "bfs"
    # restricting
    few = G.make_grid(b, ["collegemsg"], ["tbdfs", "tgat"], [0], sweep=False)
    assert [s.key for s in few] == [("collegemsg", "tbdfs", 0, "session"),
                                    ("collegemsg", "tgat", 0, "session")]
    # overrides change the budget's name, so such runs never mix with the preset's
    assert G.with_overrides(b, epochs=b.epochs).name == "session"
    assert G.with_overrides(b, epochs=2).name == "session[epochs=2]"


# ---------------------------------------------------------------------------- smoke + resume
def test_smoke_grid_writes_results_and_resumes(tmp_path, monkeypatch):
    args = ["--budget", "smoke", "--datasets", "synthetic", "--variants", "tbdfs,tgat",
            "--out-dir", str(tmp_path), "--no-progress", "--quiet"]
    assert reproduce.main(args) == 0
    results = tmp_path / "results" / "runs.jsonl"
    recs = _lines(results)
    assert sorted((r["dataset"], r["variant"], r["seed"], r["budget"]) for r in recs) == [
        ("synthetic", "tbdfs", 0, "smoke"), ("synthetic", "tgat", 0, "smoke")]
    for r in recs:
        for setting in ("transductive", "inductive"):
            assert set(r["test"][setting]) >= {"accuracy", "f1", "ap", "auc", "count"}
        assert r["epochs_run"] == 1 and r["best_epoch"] == 0
        assert len(r["history"]) == 1 and "val_ap" in r["history"][0]
        assert r["wall_seconds"] > 0 and r["seconds_per_epoch"] > 0
        assert r["budget_settings"]["max_batches"] == 2
        assert r["model_kwargs"]["alpha"] == (1.0 if r["variant"] == "tgat" else 0.5)
    assert (tmp_path / "results.md").exists()
    assert (tmp_path / "alpha_sweep.png").read_bytes()[:8] == PNG
    assert (tmp_path / "training_curves.png").read_bytes()[:8] == PNG

    # a rerun skips both finished runs
    def boom(*a, **k):
        raise AssertionError("a finished run was run again")

    monkeypatch.setattr(runner, "run_one", boom)
    assert reproduce.main(args) == 0
    assert len(_lines(results)) == 2


def _fake_record(spec, **extra):
    rec = {"dataset": spec.dataset, "variant": spec.variant.name, "seed": spec.seed,
           "budget": spec.budget.name, "wall_seconds": 0.1, "epochs_run": 1, "best_epoch": 0,
           "history": [{"epoch": 0, "val_ap": 0.5}],
           "test": {s: {"accuracy": 0.5, "f1": 0.5, "ap": 0.5, "auc": 0.5, "count": 1}
                    for s in ("transductive", "inductive")}}
    rec.update(extra)
    return rec


def test_interrupt_keeps_finished_runs_only(tmp_path, monkeypatch):
    calls = []
    interrupt = [True]

    def fake(spec, data_dir=None, log=print, hardware=None, resume=None, other_code_ok=False):
        calls.append(spec.key)
        if len(calls) == 2 and interrupt[0]:
            interrupt[0] = False
            raise KeyboardInterrupt
        return _fake_record(spec)

    monkeypatch.setattr(runner, "run_one", fake)
    args = ["--budget", "smoke", "--datasets", "synthetic,collegemsg", "--variants",
            "tbdfs,tgat", "--out-dir", str(tmp_path), "--no-progress", "--no-report"]
    assert reproduce.main(args) == 130
    results = tmp_path / "results" / "runs.jsonl"
    assert [r["variant"] for r in _lines(results)] == ["tbdfs"]
    calls.clear()
    assert reproduce.main(args) == 0
    assert len(calls) == 3 and ("synthetic", "tbdfs", 0, "smoke") not in calls
    assert len(_lines(results)) == 4


def test_failed_run_is_not_recorded(tmp_path, monkeypatch):
    def fake(spec, data_dir=None, log=print, hardware=None, resume=None, other_code_ok=False):
        if spec.variant.name == "tgat":
            raise FileNotFoundError("no such dataset")
        return _fake_record(spec)

    monkeypatch.setattr(runner, "run_one", fake)
    args = ["--budget", "smoke", "--datasets", "synthetic", "--variants", "tbdfs,tgat",
            "--out-dir", str(tmp_path), "--no-progress", "--no-report"]
    assert reproduce.main(args) == 1
    assert [r["variant"] for r in _lines(tmp_path / "results" / "runs.jsonl")] == ["tbdfs"]


def test_store_torn_line_and_strict_json(tmp_path):
    path = tmp_path / "runs.jsonl"
    store = ResultsStore(path)
    store.append({"dataset": "a", "variant": "tbdfs", "seed": 0, "budget": "b",
                  "x": float("nan"), "y": np.float32(1.5), "z": np.arange(2)})
    with open(path, "a") as fh:
        fh.write('{"dataset": "a", "variant": "tgat", "se')  # a crash inside a write
    with pytest.warns(UserWarning, match="unreadable"):
        assert len(store.load()) == 1
    store.append({"dataset": "a", "variant": "dfs", "seed": 0, "budget": "b"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        recs = store.load()
    assert [r["variant"] for r in recs] == ["tbdfs", "dfs"]
    assert recs[0]["x"] is None and recs[0]["y"] == 1.5 and recs[0]["z"] == [0, 1]
    assert store.done() == {("a", "tbdfs", 0, "b"), ("a", "dfs", 0, "b")}
    with pytest.raises(KeyError):
        store.append({"dataset": "a"})


# ---------------------------------------------------------------------------- report
def _rec(dataset, variant, seed, ap, budget="session", acc=None):
    m = {"accuracy": ap if acc is None else acc, "f1": ap, "ap": ap, "auc": ap, "count": 100}
    return {"dataset": dataset, "variant": variant, "seed": seed, "budget": budget,
            "test": {"transductive": dict(m), "inductive": {**m, "ap": ap - 0.01}},
            "val": {"transductive": dict(m), "inductive": dict(m)},
            "wall_seconds": 12.5, "epochs_run": 3, "best_epoch": 1, "seconds_per_epoch": 4.0,
            "batches_per_epoch": 8,
            "history": [{"epoch": e, "val_ap": ap - 0.1 + 0.03 * e} for e in range(3)],
            "budget_settings": G.BUDGETS["session"].settings(),
            "data": {"num_edges": 3000, "num_edges_total": 60000, "split": {"train": 1400}},
            "code": {"git_commit": "abc", "git_dirty": False, "package_sha": "123"},
            "host": "h", "cpu_count": 2, "torch_threads": 2}


def _handmade():
    rng = np.random.default_rng(0)
    recs = []
    for s in range(3):
        base = 0.80 + 0.01 * s
        # wikipedia: tBDFS clearly and consistently above TGAT -> bold
        recs.append(_rec("wikipedia", "tgat", s, base))
        recs.append(_rec("wikipedia", "tbdfs", s, base + 0.05 + 0.001 * rng.standard_normal()))
        recs.append(_rec("wikipedia", "path-avg", s, base + 0.01))
        recs.append(_rec("wikipedia", "no-time", s, base - 0.10 + 0.002 * s))
        # collegemsg: no consistent difference -> not bold
        recs.append(_rec("collegemsg", "tgat", s, 0.70 + [0.02, -0.03, 0.01][s]))
        recs.append(_rec("collegemsg", "tbdfs", s, 0.70 + [-0.01, 0.02, 0.00][s]))
    # email-eu: partial (2 of 3 seeds, tBDFS only)
    recs += [_rec("email-eu", "tbdfs", s, 0.9) for s in range(2)]
    # alpha sweep on collegemsg, seeds 0 and 1, peak at 0.3
    for a in G.SWEEP_ALPHAS:
        if a in (0.0, 0.5, 1.0):
            continue
        for s in range(2):
            recs.append(_rec("collegemsg", G.sweep_variant(a).name, s,
                             0.75 - 0.5 * (a - 0.3) ** 2 + 0.002 * s))
    recs.append(_rec("collegemsg", "dfs", 0, 0.6))
    # another budget's run must not leak into this report
    recs.append(_rec("bitcoin-otc", "tbdfs", 0, 0.99, budget="smoke"))
    return recs


def test_paired_ttest_matches_scipy():
    from scipy.stats import ttest_rel

    a = {0: 0.8, 1: 0.82, 2: 0.79, 3: 0.9}
    b = {0: 0.7, 1: 0.75, 2: 0.74, 4: 0.1}  # seed 3/4 unpaired: ignored
    t = R.paired_ttest(a, b)
    ref = ttest_rel([0.8, 0.82, 0.79], [0.7, 0.75, 0.74])
    assert t["n"] == 3 and t["p"] == pytest.approx(ref.pvalue) and t["t"] == pytest.approx(
        ref.statistic)
    assert R.paired_ttest({0: 0.5}, {0: 0.4})["p"] is None          # one pair
    assert R.paired_ttest({0: 0.5, 1: 0.6}, {0: 0.4, 1: 0.5})["p"] is None  # constant diff


def test_report_from_handmade_results(tmp_path):
    results = tmp_path / "results" / "runs.jsonl"
    store = ResultsStore(results)
    store.extend(_handmade())
    paths = R.write_report(store.load(), "session", tmp_path, results, expected_seeds=3)
    md = paths["report"].read_text()
    for p in ("alpha_sweep", "training_curves"):
        assert paths[p].read_bytes()[:8] == PNG and paths[p].stat().st_size > 5000
    # one table per metric and setting, in the paper's layout
    for metric in ("Accuracy", "F1", "AP", "ROC-AUC"):
        for setting in ("transductive", "inductive"):
            assert f"#### Test {metric}, {setting} (%)" in md
    assert "| dataset | TGAT | DFS only | tBDFS | learned alpha |" in md
    ap_table = md.split("#### Test AP, transductive (%)")[1].split("####")[0]
    rows = {line.split("|")[1].strip(): line for line in ap_table.splitlines()
            if line.startswith("| ") and not line.startswith("| dataset")}
    # wikipedia: tBDFS significantly above TGAT -> tBDFS bold, TGAT not
    wiki = [c.strip() for c in rows["wikipedia"].split("|")[1:-1]]
    assert wiki[3].startswith("**") and not wiki[1].startswith("**")
    assert wiki[1].startswith("81.00 ± 1.00")
    # collegemsg: not significant -> nothing bold
    assert "**" not in rows["collegemsg"]
    # partial grid: missing cells are n/a, incomplete cells say how many seeds
    assert "n/a" in rows["bitcoin-otc"] and "99.00" not in md.split("## Settings")[0]
    assert "(n=2)" in rows["email-eu"]
    # ablation table with the significance marker, sweep table, settings and timings
    assert "## Ablations" in md and "| dataset | tBDFS | path-avg |" in md and " †" in md
    assert "α=0.3" in md and "## Alpha sweep" in md
    assert "## Settings" in md and "max_events" in md and "## Time per run" in md
    assert "12.5" in md
    # findings computed from the numbers
    f = md.split("## Findings")[1].split("##")[0]
    assert "significantly higher (paired t, 95%) on 1 dataset(s) (wikipedia)" in f
    # pooled over datasets: wikipedia's 3 pairs all up, collegemsg's 1 of 3 (binomial(4; 6))
    assert ("Across datasets: tBDFS higher in 4 of 6 paired runs (sign test p = 0.688); "
            "mean of the 2 datasets' Δ +2.68 points (t-test over datasets p = 0.458).") in f
    assert "α = 0.3" in f and "interior" in f
    assert "largest mean drop is -time" in f


def test_the_best_sweep_point_is_found_on_the_seeds_every_point_has():
    # Seed 1 is the hard one (0.10 lower everywhere); α = 0.3 has only seed 1 so far.  Over
    # each point's own seeds α = 0.3 would look worst; on the shared seed 1 it is best.
    recs = []
    for a in G.SWEEP_ALPHAS:
        name = {0.0: "dfs", 0.5: "tbdfs", 1.0: "tgat"}.get(a, G.sweep_variant(a).name)
        for s in ((1,) if a == 0.3 else (0, 1)):
            recs.append(_rec("synthetic", name, s, 0.70 - 0.10 * s + (0.02 if a == 0.3 else 0)))
    res = R.Results(recs, "session")
    best, means, seeds = R.sweep_best(R.sweep_values(res, "synthetic"))
    assert (best, seeds) == (0.3, [1]) and means[0.3] == pytest.approx(0.62)
    assert means[0.9] == pytest.approx(0.60)
    (f,) = [x for x in R.findings(res) if "Alpha sweep" in x]
    assert "(provisional: the points have 1-2 seed(s) of 2)" in f
    assert "over the 1 seed(s) every point has is at α = 0.3 (62.00), interior" in f
    table = R._sweep_table(res, ["synthetic"]).split("#### Test Accuracy")[0]
    bold = [c.strip() for c in table.splitlines()[-2].split("|")[1:-1] if "**" in c]
    assert bold == ["**62.00** (n=1)"]
    # with every seed everywhere, nothing is provisional
    recs.append(_rec("synthetic", G.sweep_variant(0.3).name, 0, 0.72))
    (f,) = [x for x in R.findings(R.Results(recs, "session")) if "Alpha sweep" in x]
    assert "provisional" not in f and "over the 2 seed(s) every point has is at α = 0.3" in f


def test_a_learned_alpha_run_records_its_gate(tmp_path):
    args = ["--budget", "smoke", "--datasets", "synthetic", "--variants", "learned-alpha",
            "--out-dir", str(tmp_path), "--no-progress", "--quiet"]
    assert reproduce.main(args) == 0
    (rec,) = _lines(tmp_path / "results" / "runs.jsonl")
    gate = rec["learned_alpha"]
    assert 0 < gate["roots_with_path"] <= gate["roots"] and 0.0 < gate["mean"] < 1.0
    section = (tmp_path / "results.md").read_text().split("## Learned α")[1].split("## ")[0]
    assert "| synthetic | 1 | " in section


def test_report_shows_what_the_learned_gate_chose(tmp_path):
    recs = [_rec("bitcoin-otc", "learned-alpha", s, 0.8) for s in range(2)]
    for s, m in enumerate((0.6, 0.7)):
        recs[s]["learned_alpha"] = {"roots": 100, "roots_with_path": 80, "mean": m,
                                    "std": 0.1, "p10": m - 0.1, "p50": m, "p90": m + 0.1}
    recs.append(_rec("wikipedia", "learned-alpha", 0, 0.8))  # before gates were recorded
    md = R.render_markdown(R.Results(recs, "session"), 2, "runs.jsonl", "a.png", "c.png")
    section = md.split("## Learned α")[1].split("## ")[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| bitcoin")]
    assert rows == ["| bitcoin-otc | 2 | 0.650 ± 0.071 | 0.550 | 0.650 | 0.750 | 80% |"]
    assert "wikipedia" not in section
    md = R.render_markdown(R.Results(recs[2:], "session"), 2, "runs.jsonl", "a.png", "c.png")
    assert "No learned-α run recorded its gate yet" in md


def test_report_only_with_no_results(tmp_path):
    args = ["--budget", "session", "--report-only", "--out-dir", str(tmp_path)]
    assert reproduce.main(args) == 0
    md = (tmp_path / "results.md").read_text()
    assert "n/a" in md and "No alpha-sweep results yet" in md
    assert (tmp_path / "alpha_sweep.png").read_bytes()[:8] == PNG


def test_shards_own_fixed_shares_that_together_cover_the_grid(tmp_path, monkeypatch):
    ran = {0: [], 1: []}
    shard = [0]

    def fake(spec, data_dir=None, log=print, hardware=None, resume=None, other_code_ok=False):
        ran[shard[0]].append(spec.key)
        return _fake_record(spec)

    monkeypatch.setattr(runner, "run_one", fake)
    base = ["--budget", "smoke", "--datasets", "synthetic,collegemsg", "--variants",
            "tbdfs,tgat,dfs", "--out-dir", str(tmp_path), "--no-progress", "--no-report"]
    specs = reproduce.build(reproduce.parse_args(base))[1]
    for i in (0, 1):
        shard[0] = i
        assert reproduce.main(base + ["--shard", f"{i}/2"]) == 0
    # each shard owns a fixed share, even when one starts after the other has finished
    assert ran[0] == [s.key for s in specs[0::2]]
    assert ran[1] == [s.key for s in specs[1::2]]
    assert len(_lines(tmp_path / "results" / "runs.jsonl")) == len(specs)
    for bad in ("2/2", "x", "1/0", "-1/2"):
        with pytest.raises(SystemExit, match="shard"):
            reproduce.main(base + [f"--shard={bad}"])


def test_graphs_budget_reaches_the_trainer():
    b = G.BUDGETS["graphs"]
    assert b.max_events is None and b.train_batches and b.val_events and b.test_events
    cfg = runner.train_config(b, seed=3)
    assert (cfg.train_batches, cfg.val_events, cfg.test_events, cfg.seed) == (
        b.train_batches, b.val_events, b.test_events, 3)
    assert reproduce.default_out_dir("graphs") == reproduce.ROOT / "docs" / "graphs"
    assert reproduce.default_out_dir("full") == reproduce.ROOT / "docs" / "full"
    assert reproduce.default_out_dir("session") == reproduce.ROOT / "docs"
    over = G.with_overrides(b, train_batches=3)
    assert over.name == "graphs[train_batches=3]"
    assert runner.train_config(over, 0).train_batches == 3
    # the estimate counts drawn batches and drawn evaluation events
    assert runner._n_batches(100_000, 200, None, draw=12) == 12
    assert runner._n_batches(50_000, 200, None, events=1000) == 5
    assert runner._n_batches(700, 200, None, events=1000) == 4


def test_learning_overrides_from_the_command_line_rename_the_budget(tmp_path):
    args = ["--budget", "graphs", "--datasets", "collegemsg", "--variants", "tgat",
            "--out-dir", str(tmp_path), "--no-progress", "--lr", "1e-3",
            "--time-encoding", "cos_sin", "--train-negatives", "active"]
    budget, specs = reproduce.build(reproduce.parse_args(args))[:2]
    assert budget.name == "graphs[lr=0.001,time_encoding=cos_sin,train_negatives=active]"
    assert (budget.lr, budget.time_encoding, budget.train_negatives) == (
        1e-3, "cos_sin", "active")
    assert all(s.budget == budget for s in specs)
    cfg = runner.train_config(budget, seed=0)
    assert (cfg.lr, cfg.train_negatives) == (1e-3, "active")
    # unchanged values leave the preset's name alone
    same = reproduce.build(reproduce.parse_args(args[:8] + ["--lr", "1e-4"]))[0]
    assert same.name == "graphs"
    with pytest.raises(SystemExit):
        reproduce.parse_args(args[:8] + ["--time-encoding", "nope"])


def test_eval_negatives_and_candidates_reach_results_and_report(tmp_path):
    args = ["--budget", "smoke", "--datasets", "synthetic", "--variants", "tbdfs,tgat",
            "--eval-negatives", "historical", "--eval-candidates", "3",
            "--out-dir", str(tmp_path), "--no-progress", "--quiet"]
    assert reproduce.main(args) == 0
    recs = _lines(tmp_path / "results" / "runs.jsonl")
    assert {r["budget"] for r in recs} == {"smoke[eval_candidates=3,eval_negatives=historical]"}
    for r in recs:
        assert (r["config"]["eval_negatives"], r["config"]["eval_candidates"]) == ("historical", 3)
        assert r["budget_settings"]["eval_negatives"] == "historical"
        for setting in ("transductive", "inductive"):
            m = r["test"][setting]
            assert m["candidates"] == 3 and {"mrr", "hits@1", "hits@3", "hits@10", "ap"} <= set(m)
    md = (tmp_path / "results.md").read_text()
    assert "#### Test MRR, transductive" in md and "#### Test Hits@10, inductive" in md
    assert "| eval_negatives | `historical` |" in md
    # the default budget records and reports no ranking (as before the option existed)
    assert "eval_negatives" not in G.BUDGETS["smoke"].settings()
    assert not R.Results([{"budget": "b", "dataset": "d", "variant": "tbdfs", "seed": 0,
                           "test": {"transductive": {"ap": 0.5}}}], "b").has_ranking
    with pytest.raises(SystemExit, match="eval-candidates"):
        reproduce.main(["--budget", "smoke", "--eval-candidates", "0", "--report-only",
                        "--out-dir", str(tmp_path)])


# ---------------------------------------------------------------------------- full budgets
def test_full_budgets_pin_the_paper_protocol_and_the_current_model():
    full, recent = G.BUDGETS["full"], G.BUDGETS["full-recent"]
    for b in (full, recent):
        assert (b.epochs, b.patience, b.lr, b.batch_size, b.seeds) == (50, 5, 1e-4, 200, 5)
        assert b.max_events is None and b.train_batches is None and b.val_events is None
        kw = runner.model_kwargs(b, runner.get_dataset("synthetic"), {})
        cfg = runner.train_config(b, seed=2)
        assert kw["time_encoding"] == "cos_phase" and cfg.train_negatives == "all"
        # recorded, so the report can say which formulation each run used
        assert b.settings()["time_encoding"] == "cos_phase"
        assert reproduce.default_out_dir(b.name) == reproduce.ROOT / "docs" / b.name
    assert (tuple(full.fanouts), full.strategy) == ((20, 20), "uniform")  # the paper's
    assert (tuple(recent.fanouts), recent.strategy) == ((10, 10), "recent")  # ours
    cfg = runner.train_config(full, 0)
    assert (list(cfg.fanouts), cfg.strategy) == ([20, 20], "uniform")
    # the budgets reported before keep release 0.1's formulation, and their recorded
    # settings match the records made before these settings existed
    for name in ("smoke", "session"):
        b = G.BUDGETS[name]
        assert runner.model_kwargs(b, runner.get_dataset("synthetic"), {})[
            "time_encoding"] == "cos_sin"
        assert runner.train_config(b, 0).train_negatives == "all"
        assert not set(G.LEGACY_SETTINGS) & set(b.settings())
    # graphs moved to the current model at the paper's learning rate in round 6 (its
    # release-0.1 records are kept apart); its records name the encoding
    graphs = G.BUDGETS["graphs"]
    assert runner.model_kwargs(graphs, runner.get_dataset("synthetic"), {})[
        "time_encoding"] == "cos_phase"
    assert runner.train_config(graphs, 0).lr == 1e-4
    assert graphs.settings()["time_encoding"] == "cos_phase"


def test_hardware_options_reach_the_trainer_and_the_record(tmp_path, monkeypatch):
    hw = runner.Hardware(device="cpu", compile=False, amp="bf16")
    cfg = runner.train_config(G.BUDGETS["smoke"], 0, hw)
    assert (cfg.device, cfg.compile, cfg.amp) == ("cpu", False, "bf16")
    seen = []
    real = runner.run_one

    def spy(spec, data_dir=None, log=print, hardware=runner.Hardware(), resume=None,
            other_code_ok=False):
        seen.append(hardware)
        return real(spec, data_dir, log, hardware, resume, other_code_ok)

    monkeypatch.setattr(runner, "run_one", spy)
    args = ["--budget", "smoke", "--datasets", "synthetic", "--variants", "tgat",
            "--device", "cpu", "--out-dir", str(tmp_path), "--no-progress", "--quiet",
            "--no-report"]
    assert reproduce.main(args) == 0
    huge = huge_page_tensors()  # reproduce.py asks for huge pages unless told otherwise
    assert seen == [runner.Hardware("cpu", False, None, huge_pages=huge)]
    rec = _lines(tmp_path / "results" / "runs.jsonl")[0]
    assert rec["huge_pages"] is huge
    assert (rec["device"], rec["compile"], rec["amp"]) == ("cpu", False, None)
    assert rec["compile_mode"] is None
    assert rec["cpu_gemm"] in ("onednn", "mkl")
    assert rec["retain_memory"] is False
    hw = runner.Hardware(device="cpu", compile=True, compile_mode="reduce-overhead")
    assert runner.train_config(G.BUDGETS["smoke"], 0, hw).compile_mode == "reduce-overhead"
    # (parsed only: the malloc tuning is process-wide, not for the test process)
    hw = reproduce._hardware(reproduce.parse_args(args + ["--retain-memory"]))
    assert hw.retain_memory and runner.train_config(G.BUDGETS["smoke"], 0, hw).retain_memory
    with pytest.raises(SystemExit, match="--compile-mode needs --compile"):
        reproduce.main(args + ["--compile-mode", "reduce-overhead"])


def test_a_run_stopped_midway_resumes_from_its_last_epoch(tmp_path, monkeypatch, capsys):
    from tbdfs_dgl.linkpred import LinkPredictionTrainer

    base = ["--budget", "smoke", "--datasets", "synthetic", "--variants", "tbdfs",
            "--epochs", "3", "--no-progress", "--quiet", "--no-report"]
    assert reproduce.main(base + ["--out-dir", str(tmp_path / "straight")]) == 0
    (straight,) = _lines(tmp_path / "straight" / "results" / "runs.jsonl")

    real_epoch = LinkPredictionTrainer.train_epoch

    def killed_at_2(self, epoch):
        if epoch == 2:
            raise KeyboardInterrupt
        return real_epoch(self, epoch)

    out = tmp_path / "stopped"
    monkeypatch.setattr(LinkPredictionTrainer, "train_epoch", killed_at_2)
    assert reproduce.main(base + ["--out-dir", str(out)]) == 130
    states = sorted(p.name for p in (out / "results" / "resume").rglob("*") if p.is_file())
    assert states == ["synthetic__tbdfs__seed0.code.json", "synthetic__tbdfs__seed0.state"]
    assert not (out / "results" / "runs.jsonl").exists()
    capsys.readouterr()
    assert reproduce.main(base + ["--out-dir", str(out), "--in-progress"]) == 0
    shown = capsys.readouterr().out
    assert "1 run(s) in progress" in shown and "synthetic/tbdfs/seed0: 2 epoch(s) done" in shown
    assert "already in the results file" not in shown
    state = runner.state_path(reproduce.build(reproduce.parse_args(base))[1][0],
                              out / "results" / "resume")
    saved = state.read_bytes()
    monkeypatch.setattr(LinkPredictionTrainer, "train_epoch", real_epoch)
    assert reproduce.main(base + ["--out-dir", str(out)]) == 0
    (resumed,) = _lines(out / "results" / "runs.jsonl")
    assert [h["loss"] for h in resumed["history"]] == [h["loss"] for h in straight["history"]]
    assert resumed["test"] == straight["test"]
    assert resumed["resumed"]["at_epoch"] == 2 and "resumed" not in straight
    assert resumed["resumed"]["segments"] == [{"first_epoch": 0, "device": "cpu"},
                                              {"first_epoch": 2, "device": "cpu"}]
    assert resumed["wall_seconds"] > resumed["resumed"]["earlier_seconds"] > 0
    assert not [p for p in (out / "results" / "resume").rglob("*") if p.is_file()]
    # A finished run's state brought back from elsewhere is shown as such, then deleted.
    state.write_bytes(saved)
    capsys.readouterr()
    assert reproduce.main(base + ["--out-dir", str(out), "--in-progress"]) == 0
    assert "2 epoch(s) done" in (shown := capsys.readouterr().out)
    assert "already in the results file" in shown
    assert reproduce.main(base + ["--out-dir", str(out)]) == 0
    assert not state.exists()
    state.write_bytes(b"")
    assert reproduce.main(base + ["--out-dir", str(out), "--in-progress"]) == 0
    assert "unreadable" in capsys.readouterr().out


def test_a_state_of_other_package_sources_is_refused(tmp_path, monkeypatch, capsys):
    from tbdfs_dgl.linkpred import LinkPredictionTrainer

    args = ["--budget", "smoke", "--datasets", "synthetic", "--variants", "tgat", "--epochs",
            "2", "--out-dir", str(tmp_path), "--no-progress", "--quiet", "--no-report"]
    real_epoch = LinkPredictionTrainer.train_epoch

    def killed_at_1(self, epoch):
        if epoch == 1:
            raise KeyboardInterrupt
        return real_epoch(self, epoch)

    monkeypatch.setattr(LinkPredictionTrainer, "train_epoch", killed_at_1)
    assert reproduce.main(args) == 130
    (sidecar,) = (tmp_path / "results" / "resume").rglob("*.code.json")
    sidecar.write_text(json.dumps(dict(json.loads(sidecar.read_text()), package_sha="0" * 12)))
    monkeypatch.setattr(LinkPredictionTrainer, "train_epoch", real_epoch)
    # Refused before anything runs: a grid must not start fresh runs and then stop at
    # this one (nor, without --fail-fast, go on past it).
    started = []
    monkeypatch.setattr(runner, "run_one", lambda spec, *a, **k: started.append(spec))
    capsys.readouterr()
    assert reproduce.main(args + ["--variants", "tgat,tbdfs"]) == 2
    err = capsys.readouterr().err
    assert re.search(r"synthetic/tgat/seed0: .* other package sources.*delete .* to start it "
                     r"over", err) and "1 run(s) cannot resume" in err
    assert started == []
    monkeypatch.undo()
    # Asked to, it resumes under these sources, and the record names both versions.
    assert reproduce.main(args + ["--resume-other-code"]) == 0
    (rec,) = _lines(tmp_path / "results" / "runs.jsonl")
    assert rec["code"]["package_sha"] == "0" * 12
    assert rec["resumed"]["code"]["package_sha"] == runner.code_version()["package_sha"]
    assert not sidecar.exists()
    # Without resuming, nothing is saved.
    plain = tmp_path / "plain"
    assert reproduce.main(args[:-5] + ["--out-dir", str(plain), "--no-progress", "--quiet",
                                       "--no-report", "--no-resume"]) == 0
    assert not (plain / "results" / "resume").exists()


def _curve_record(dataset, variant, seed, curve, cap=50, budget="full"):
    rec = {"budget": budget, "dataset": dataset, "variant": variant, "seed": seed,
           "budget_settings": {"epochs": cap}, "epochs_run": len(curve),
           "best_epoch": int(np.argmax(curve)), "wall_seconds": 10.0,
           "history": [{"epoch": i, "val_ap": v} for i, v in enumerate(curve)],
           "test": {s: {"ap": 0.7 + 0.01 * seed} for s in ("transductive", "inductive")}}
    return rec


def test_report_marks_resumed_runs():
    plain = _curve_record("collegemsg", "tgat", 0, [0.6, 0.7])
    resumed = dict(_curve_record("collegemsg", "tgat", 1, [0.6, 0.7]),
                   resumed={"at_epoch": 1, "earlier_seconds": 4.0})
    text = R._timing_section(R.Results([plain, resumed], "full"))
    assert text.count("(resumed after 1 epochs)") == 1
    assert "its wall time is its sessions' together" in text
    assert "resumed" not in R._timing_section(R.Results([plain], "full"))


def test_the_verdict_table_says_per_dataset_who_is_ahead_and_how_sure():
    # tBDFS ahead on every CollegeMsg seed by 1-3 points (inductive 0.01 lower in each,
    # so ahead there too); on Bitcoin-OTC the gaps change sign; on email-Eu TGAT and
    # tBDFS have 5 seeds, learned alpha 2 (and it is level); Wikipedia has 3 seeds.
    gaps = [0.01, 0.02, 0.03, 0.015, 0.025]
    recs = []
    for s, g in enumerate(gaps):
        recs += [_rec("collegemsg", "tgat", s, 0.70, budget="full"),
                 _rec("collegemsg", "tbdfs", s, 0.70 + g, budget="full"),
                 _rec("collegemsg", "learned-alpha", s, 0.70 + g, budget="full"),
                 _rec("bitcoin-otc", "tgat", s, 0.80, budget="full"),
                 _rec("bitcoin-otc", "tbdfs", s, 0.80 + (-1) ** s * g, budget="full"),
                 _rec("bitcoin-otc", "learned-alpha", s, 0.80 - 2 * g, budget="full"),
                 _rec("email-eu", "tgat", s, 0.75, budget="full"),
                 _rec("email-eu", "tbdfs", s, 0.80 + g, budget="full")]
        if s < 2:
            recs.append(_rec("email-eu", "learned-alpha", s, 0.80 + g + 0.001 * s,
                             budget="full"))
        if s < 3:
            recs += [_rec("wikipedia", v, s, 0.9 + (v != "tgat") * (0.02 + 0.001 * s),
                          budget="full")
                     for v in R.MAIN_COMPARISON]
    rows = {line.split(" | ")[0].lstrip("| "): line
            for line in R.verdict_table(R.Results(recs, "full"), 5).splitlines()[2:]
            if line.startswith("| ")}
    assert set(rows) == {"wikipedia", "collegemsg", "email-eu", "bitcoin-otc"}
    assert rows["collegemsg"].startswith("| collegemsg | 5/5/5 | +2.00 (p ")
    assert rows["collegemsg"].endswith(" | tBDFS ahead of TGAT (inductive too) |")
    assert rows["bitcoin-otc"].endswith("| tBDFS and TGAT not significantly different "
                                        "(inductive too); learned α lower than tBDFS |")
    assert rows["email-eu"].endswith("| tBDFS ahead of TGAT (inductive too); learned α has "
                                     "2 of 5 seeds |")
    assert rows["wikipedia"].endswith("| provisional: tBDFS ahead of TGAT (inductive too); "
                                      "learned α has 3 of 5 seeds |")
    assert "| 3/3/3 |" in rows["wikipedia"]
    one_pair = [_rec("synthetic", v, 0, 0.6 + 0.01 * (v == "tbdfs"), budget="full")
                for v in ("tgat", "tbdfs")]
    assert R.verdict_table(R.Results(one_pair, "full"), 5).splitlines()[2].endswith(
        "| not yet testable (1 paired seed(s)); learned α has 0 of 5 seeds |")
    assert R.verdict_table(R.Results([], "full"), 5).startswith("(No main-comparison runs")


def test_report_states_convergence_and_which_cells_are_complete(tmp_path, monkeypatch):
    recs = [_curve_record("collegemsg", v, s, [0.6, 0.7, 0.69, 0.68, 0.67, 0.66, 0.65])
            for v in R.MAIN_COMPARISON for s in range(5)]
    recs.append(_curve_record("wikipedia", "tgat", 0, [0.8, 0.9, 0.95], cap=3))
    res = R.Results(recs, "full")
    (line,) = R.completeness(res, 5)
    assert "complete on: collegemsg;" in line
    assert "wikipedia (TGAT 1/5, tBDFS 0/5, learned alpha 0/5)" in line
    assert "not started: email-eu, bitcoin-otc, synthetic" in line

    # the report is written without matplotlib (a bare GPU machine): tables, no plots
    def no_matplotlib():
        raise ImportError("No module named 'matplotlib'")

    monkeypatch.setattr(R, "_plt", no_matplotlib)
    paths = R.write_report(recs, "full", tmp_path, tmp_path / "runs.jsonl")
    md = paths["report"].read_text()
    assert "## Convergence" in md
    assert "| collegemsg | tBDFS − TGAT | 6 6 6 6 6 |" in md  # the equal-training check
    assert "| collegemsg | 5/5/5 |" in md.split("## Verdict per dataset")[1]
    # 5 collegemsg runs stopped on patience (7 of 50 epochs, best epoch 1); the
    # wikipedia run hit its cap of 3 epochs
    assert "| collegemsg | TGAT | 5 | 7 7 7 7 7 | 1 1 1 1 1 | 5/5 |" in md
    assert "| wikipedia | TGAT | 1 | 3 | 2 | 0/1 |" in md
    assert "| wikipedia | TGAT | 0 | 80.0 90.0 95.0 |" in md
    assert "scaled-down" not in md  # the full budgets are the paper's protocol
    assert not (tmp_path / "alpha_sweep.png").exists()


def test_equal_training_compares_each_seed_by_its_shorter_runs_last_epoch():
    # TGAT stops after 3 epochs (seed 0) and 4 (seed 1); tBDFS trains on and passes it
    # only later, so at equal epochs it is behind and over whole runs ahead.
    recs = [_curve_record("wikipedia", "tgat", 0, [0.60, 0.70, 0.70]),
            _curve_record("wikipedia", "tbdfs", 0, [0.60, 0.65, 0.68, 0.80, 0.90]),
            _curve_record("wikipedia", "tgat", 1, [0.60, 0.72, 0.71, 0.71]),
            _curve_record("wikipedia", "tbdfs", 1, [0.61, 0.66, 0.69, 0.69, 0.92, 0.90]),
            _curve_record("wikipedia", "tbdfs", 2, [0.5, 0.6])]  # no TGAT seed 2: unpaired
    res = R.Results(recs, "full")
    pairs = R.at_equal_epochs(res, "wikipedia", "tbdfs", "tgat")
    assert set(pairs) == {0, 1}
    assert pairs[0] == (2, pytest.approx(0.68), pytest.approx(0.70))
    assert pairs[1] == (3, pytest.approx(0.69), pytest.approx(0.72))
    assert R.best_val_by_epoch(recs[1]) == pytest.approx(0.90)
    assert R.best_val_by_epoch(recs[1], 0) == pytest.approx(0.60)
    assert R.best_val_by_epoch({"history": [{"val_ap": float("nan")}]}) is None
    (row,) = [line for line in R.equal_training_table(res).splitlines()
              if line.startswith("| wikipedia")]
    # by k: -2 and -3 points (t = -5, 1 df: p 0.126); whole runs +20 and +20 (p undefined)
    assert row == ("| wikipedia | tBDFS − TGAT | 2 3 | -2.50 (p 0.126, n 2) | "
                   "+20.00 (p undefined, n 2) |")
    assert "No seed has" in R.equal_training_table(R.Results(recs[:1], "full"))


def test_runner_works_without_dgl(tmp_path):
    from test_without_dgl import run_without_dgl

    proc = run_without_dgl(f"""
        import sys
        sys.path.insert(0, {str(ROOT / 'examples')!r})
        import reproduce
        rc = reproduce.main(["--budget", "smoke", "--datasets", "synthetic", "--variants",
                             "tbdfs,tgat", "--out-dir", {str(tmp_path)!r}, "--no-progress",
                             "--quiet"])
        assert "dgl" not in sys.modules, "DGL was imported"
        print("RC", rc)
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "RC 0" in proc.stdout
    assert len(_lines(tmp_path / "results" / "runs.jsonl")) == 2


def test_code_version_warning_only_when_the_package_differs(tmp_path):
    def rec(seed, commit, sha):
        r = _curve_record("synthetic", "tgat", seed, [0.6, 0.7])
        r["code"] = {"git_commit": commit, "git_dirty": False, "package_sha": sha}
        return r

    same = R.render_markdown(R.Results([rec(0, "a1", "s1"), rec(1, "b2", "s1")], "full"),
                             5, "runs.jsonl", "a.png", "b.png")
    assert "Code versions" in same and "different versions" not in same
    other = R.render_markdown(R.Results([rec(0, "a1", "s1"), rec(1, "b2", "s2")], "full"),
                              5, "runs.jsonl", "a.png", "b.png")
    assert "different versions of the package" in other


@pytest.mark.parametrize("flags", [["--seeds", "a"], ["--seeds", "0,-1"], ["--seeds", ","],
                                   ["--num-seeds", "0"]])
def test_bad_seed_lists_are_refused_by_name(flags):
    with pytest.raises(SystemExit, match="seeds must be"):
        reproduce.main(["--budget", "smoke", "--datasets", "synthetic", "--variants", "tgat",
                        "--estimate", *flags])
