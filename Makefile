# Two entry points (see README): `make demo` and `make test`. Both set everything up first.
PY ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: setup demo test bench models format

# Debian packages: PortAudio (sounddevice), mosquitto (MQTT tests), PulseAudio (virtual audio devices),
# chromium (the HTML report tested in a real browser)
SYSTEM_PACKAGES := libportaudio2 mosquitto pulseaudio pulseaudio-utils libasound2-plugins chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

$(STAMP): pyproject.toml
	dpkg -s $(SYSTEM_PACKAGES) >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(SYSTEM_PACKAGES) >/dev/null; }
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet torch==2.13.0  # CPU wheel; GPU users install their own CUDA build first
	$(VENV)/bin/pip install --quiet -e '.[dev]'  # dev: the tests' tools, and Pipecat (with Smart Turn v3.2)
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(VENV)/bin/ttfat replay recordings/ --out runs/demo --force --html runs/demo/report.html

test: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/pytest -q; rc=$$?; [ $$rc -ne 5 ] || echo 'pytest collected no tests: that is a failure here'; exit $$rc

bench: setup
	$(VENV)/bin/python bench/engine.py
	$(VENV)/bin/python bench/llm_server.py
	$(VENV)/bin/python bench/pipeline.py

# The bundled models from scratch on this commit's generator (llm/support/recipe.toml; about two hours on
# two CPU cores with bf16 hardware, resumable): train into build/models, then evaluate, then copy over the
# bundled weights.
models: setup
	$(VENV)/bin/ttfat train --recipe llm/support/recipe.toml --out build/models
	$(VENV)/bin/ttfat eval-llm --model build/models/diffusion --ar-model build/models/ar -n 2000 \
		--default-only --out build/models/eval
	$(VENV)/bin/ttfat train --recipe llm/support/recipe.toml --out build/models --install

# The formatter owns the layout (CI checks it): `# fmt: skip` only where a table is data.
format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .
