# Two entry points (see README): `make demo` and `make test`. Both set everything up first.
PY ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint bench

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet torch==2.13.0  # CPU wheel; GPU users install their own CUDA build first
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(VENV)/bin/ttfat ask "hi, where is my order one zero two eight"
	$(VENV)/bin/ttfat ask "what time do you open on saturday"

test: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/pytest -q; rc=$$?; [ $$rc -ne 5 ] || echo 'pytest collected no tests: that is a failure here'; exit $$rc

bench: setup
	$(VENV)/bin/python bench/engine.py
