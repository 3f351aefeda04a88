# Each target does its own set-up first (creates .venv, torch 2.13.0 first, then the rest).
PY := .venv/bin/python
DATA ?= ../shared/data/tiny-imagenet-200.tar.gz

.PHONY: setup test lint demo own-photos clean-cache

setup:
	@bash scripts/setup.sh

test: setup
	$(PY) -m ruff check .
	$(PY) -m pytest -q

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

demo: setup
	$(PY) -m scripts.demo --data $(DATA)

# Your own photos, end to end (docs/training.md): a 24-class plain-named ImageFolder and its vocabulary
own-photos: setup
	$(PY) -m scripts.own_photos --data $(DATA)
