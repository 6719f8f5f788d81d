"""Suite-wide test setup: per-test seeding, the ``--slow`` option and the DGL-free mode.

Seeding
    Every test starts with torch, numpy's global RNG, Python's ``random`` and DGL seeded
    from one number, printed in the test's report header section on failure (captured
    stdout) and recorded in ``item.user_properties``.  The number is derived from the test's
    node id and ``TBDFS_TEST_SEED`` (default 0), so each test is repeatable on its own, and
    ``TBDFS_TEST_SEED=<n> pytest ...`` reruns the suite under other draws.

Sanitizer mode (``TBDFS_NO_DGL=1``)
    ``make sanitize`` runs the C++-facing tests in a process whose extension is built with
    AddressSanitizer.  DGL's own compiled library trips ASan, so in this mode DGL cannot be
    imported (``sys.modules['dgl'] = None``) and any test that tries to import it is
    reported as skipped instead of failed.  Test modules import DGL through
    :func:`optional_dgl` so that they still collect.
"""
from __future__ import annotations

import os
import random
import sys
import zlib
from typing import Any

import numpy as np
import pytest

NO_DGL = os.environ.get("TBDFS_NO_DGL") == "1"
if NO_DGL:
    sys.modules["dgl"] = None  # type: ignore[assignment]  # makes `import dgl` fail

BASE_SEED = int(os.environ.get("TBDFS_TEST_SEED", "0"))


class _MissingDGL:
    """Stands in for the ``dgl`` module in sanitizer mode: any use raises ImportError,
    which the report hook below turns into a skip."""

    def __getattr__(self, name: str) -> Any:
        raise ImportError(f"dgl is disabled in this run (TBDFS_NO_DGL=1); needed for dgl.{name}")


def optional_dgl() -> Any:
    """The ``dgl`` module, or a stand-in whose attributes raise ImportError (sanitizer mode)."""
    try:
        import dgl
    except ImportError:
        if not NO_DGL:
            raise
        return _MissingDGL()
    return dgl


def test_seed(nodeid: str) -> int:
    """The seed of one test: stable per test id, shifted by ``TBDFS_TEST_SEED``."""
    return (zlib.crc32(nodeid.encode()) + 1_000_003 * BASE_SEED) % (2**31)


test_seed.__test__ = False  # not a test


def pytest_addoption(parser: Any) -> None:
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run the long randomized tests (marked 'slow')")


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "slow: long randomized test, run with --slow")


def pytest_collection_modifyitems(config: Any, items: list) -> None:
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="long test: pass --slow to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config: Any) -> str:
    extra = ", DGL disabled (sanitizer mode)" if NO_DGL else ""
    return f"tbdfs: TBDFS_TEST_SEED={BASE_SEED}{extra}"


@pytest.fixture(autouse=True)
def _seed_everything(request: Any) -> int:
    """Seed every RNG a test may touch; the seed is printed so a failure can be replayed."""
    seed = test_seed(request.node.nodeid)
    request.node.user_properties.append(("seed", seed))
    print(f"[tbdfs] test seed {seed} (TBDFS_TEST_SEED={BASE_SEED})")
    random.seed(seed)
    np.random.seed(seed)
    if "torch" in sys.modules or not NO_DGL:
        import torch

        torch.manual_seed(seed)
    if not NO_DGL and "dgl" in sys.modules:
        # Only when a test module already imported DGL: importing it here would cost every
        # DGL-free test (tbdfs_dgl.data) a second of start-up.
        sys.modules["dgl"].seed(seed)
    return seed


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Any:
    outcome = yield
    if not NO_DGL or call.excinfo is None:
        return
    exc = call.excinfo.value
    name = getattr(exc, "name", None) or ""
    if isinstance(exc, ImportError) and (name == "dgl" or name.startswith("dgl.")
                                         or "TBDFS_NO_DGL" in str(exc)):
        report = outcome.get_result()
        report.outcome = "skipped"
        report.longrepr = (str(item.fspath), item.location[1] or 0,
                           "needs DGL (disabled in sanitizer mode)")
