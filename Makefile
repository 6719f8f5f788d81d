# The two commands of the README.  Each sets up .venv and the extension when missing.
PY := .venv/bin/python
export PYTHONPATH := $(CURDIR)

.PHONY: run test bench sanitize setup clean

run: setup   ## the main job: train tBDFS on Wikipedia (synthetic stand-in when no data)
	$(PY) examples/train_wikipedia.py $(ARGS)

test: setup  ## the test suite
	$(PY) -m pytest -q $(ARGS)

sanitize: setup ## C++-facing tests against an ASan+UBSan build of the extension (build/sanitize)
	PY=$(PY) bash scripts/sanitize.sh $(ARGS)

bench: setup ## the sampler benchmark
	$(PY) examples/benchmark_sampler.py $(ARGS)

setup:
	@bash scripts/bootstrap.sh

clean:
	rm -rf build tbdfs_dgl/_C*.so
