"""Put this folder first on PYTHONPATH to run a process as if DGL were not installed."""
raise ImportError("No module named 'dgl' (blocked by tests/no_dgl for this test)")
