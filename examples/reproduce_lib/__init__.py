"""Helpers of ``examples/reproduce.py``: the grid, the results file, runs and the report."""
from .grid import (ABLATIONS, BUDGETS, DATASETS, MAIN_METHODS, SWEEP_ALPHAS, VARIANTS, Budget,
                   RunSpec, make_grid, sweep_variant, variant_by_name, with_overrides)
from .store import ResultsStore, clean_json, run_key

__all__ = ["ABLATIONS", "BUDGETS", "DATASETS", "MAIN_METHODS", "SWEEP_ALPHAS", "VARIANTS",
           "Budget", "RunSpec", "make_grid", "sweep_variant", "variant_by_name",
           "with_overrides", "ResultsStore", "clean_json", "run_key"]
