# Two entry points for a fresh machine (see README): `make forecast` and `make test`. Each sets itself up.
VENV ?= .venv
PY := $(VENV)/bin/python
# --no-compile: no .pyc for every file of every wheel (torch alone has thousands); Python compiles what it imports.
PIP := $(PY) -m pip install --quiet --disable-pip-version-check --no-compile -c requirements/constraints.txt
STAMP := $(VENV)/.tsfm-installed

.PHONY: setup browser forecast forecast-etth1 test lint bench-cpu train-default train-default-cpu

$(STAMP): pyproject.toml requirements/constraints.txt requirements/no-deps.txt
	python3 -m venv $(VENV)
	$(PIP) torch==2.13.0
	$(PIP) -e '.[plotting,parquet,train,eval,serve,dev]'
	$(PIP) --no-deps -r requirements/no-deps.txt
	touch $(STAMP)

# Debian's Chromium for the forecast page's browser test (skipped, with its reason, when absent). Needs root.
browser:
	command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		(apt-get update -qq && apt-get install -y -qq chromium chromium-driver)

setup: $(STAMP)

# The main job: zero-shot forecast of real weekly data shipped with the repository (CDC ILINet, public domain, see
# examples/README.md) with the shipped default model; needs nothing beside the checkout.
forecast: $(STAMP)
	$(VENV)/bin/tsfm forecast examples/ilinet.csv -H 26 -o out/forecast.csv --plot out/forecast.png

# The same on ETTh1 (hourly, 7 series), read from ../shared/data/raw (or $$TSFM_SHARED_DIR/data/raw) when it is there.
forecast-etth1: $(STAMP)
	$(PY) scripts/example_data.py --out out/etth1.csv
	$(VENV)/bin/tsfm forecast out/etth1.csv -H 48 -o out/forecast_etth1.csv --plot out/forecast_etth1.png

# Two pytest-xdist workers (CI has 2 cores), a test file per worker (module fixtures made once; see tests/conftest.py).
test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -n 2 --dist loadfile

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench-cpu: $(STAMP)
	$(PY) -m benchmarks.predict_cpu

# The exact training of tsfm/models/default. It NEEDS AN NVIDIA GPU (H200: 7.4 minutes of training, torch.compile,
# bf16): the pretraining corpus is capped as on the device (scripts/device/pretrain_many.sh ran the same `tsfm train`),
# then the checkpoint is stored in bf16 with masked decoding (scripts/ship_default.py). On a CPU it would
# take days; `make train-default-cpu` is the earlier 1M CPU recipe (16 minutes, MASE 1.462 / CRPS 1.095).
train-default: $(STAMP)
	$(VENV)/bin/python -m tsfm.pipelines.data build-pretrain --out data/pretrain
	$(VENV)/bin/python scripts/cap_corpus.py data/pretrain data/device/pretrain --max-length 100000
	$(VENV)/bin/tsfm train --backbone 'xlstm[0:1]' --horizon-embedding --preset 10M --steps 4000 --max-minutes 7.4 \
		--batch-size 1024 --learning-rate 1e-3 --warmup-steps 250 --horizon-patches 24 --synthetic-share 0.5 \
		--pool-size 16384 --val-every 500 --checkpoint-every 1000 --compile --real-data data/device/pretrain \
		--out runs/x01h-10m-4k
	$(VENV)/bin/python scripts/ship_default.py runs/x01h-10m-4k/model tsfm/models/default --decoding masked

train-default-cpu: $(STAMP)
	$(VENV)/bin/python -m tsfm.pipelines.data build-pretrain --out data/pretrain
	OMP_NUM_THREADS=1 $(VENV)/bin/tsfm train --backbone 'xlstm[3:1]' --preset 1M --steps 3000 --batch-size 64 \
		--learning-rate 2e-3 --context-length 512 --real-data data/pretrain --out runs/default-cpu
