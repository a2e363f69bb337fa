"""GIFT-Eval's protocol on a benchmark root: forecasts, metrics, ``all_results.csv``, Seasonal-Naive normalisation.

``evaluate(["default", "seasonal_naive"], "bench/")`` scores each model on every configuration of the root (our
offline benchmark's ``benchmark.json``, or the 97 official configurations of a real GIFT-Eval download) exactly as
GIFT-Eval's notebooks do: multivariate data per variate, gluonts ``evaluate_model`` with ``axis=None,
mask_invalid_label=True, allow_nan_forecast=False, seasonality=get_seasonality(freq)``, and GIFT-Eval's metric list.
Each model gets ``OUT/<model>/all_results.csv`` in GIFT-Eval's columns and keys (so our rows sit beside published
ones) and ``OUT/<model>/run.json`` with its wall times, settings, the machine, and its values normalised by Seasonal
Naive with their geometric means (overall and per term), as the leaderboard ranks models.

Models are named by what the user types: a baseline of :data:`tsfm.pipelines.baselines.BASELINES`, a built-in tsfm model
(``default``) or a checkpoint folder. This module owns the protocol and the aggregation; the gluonts adapter is
:mod:`tsfm.pipelines.predictor`, the statistical models :mod:`tsfm.pipelines.baselines`, tables and plots
:mod:`tsfm.pipelines.report`.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .data.gift_eval import BENCHMARK_FILE, GIFT_EVAL_CONFIGS, GiftEvalDataset, Term, config_key, configurations
from .data.gift_format import is_dataset_dir
from .predictor import QUANTILE_LEVELS

__all__ = [
    "CRPS",
    "MASE",
    "METRIC_NAMES",
    "RESULT_COLUMNS",
    "BenchmarkError",
    "EvalModel",
    "EvaluationError",
    "UnknownConfigError",
    "UnknownModelError",
    "config_keys",
    "evaluate",
    "evaluate_predictor",
    "geometric_mean",
    "gift_eval_metrics",
    "normalise",
    "read_results",
    "resolve_model",
    "select_configs",
    "summarise",
]

METRIC_NAMES: tuple[str, ...] = (
    "MSE[mean]",
    "MSE[0.5]",
    "MAE[mean]",
    "MAE[0.5]",
    "MASE[0.5]",
    "MAPE[0.5]",
    "sMAPE[0.5]",
    "MSIS",
    "RMSE[mean]",
    "NRMSE[mean]",
    "ND[0.5]",
    "mean_weighted_sum_quantile_loss",
)
"""gluonts metric names in GIFT-Eval's column order."""

RESULT_COLUMNS: tuple[str, ...] = (
    "dataset",
    "model",
    *(f"eval_metrics/{m}" for m in METRIC_NAMES),
    "domain",
    "num_variates",
)
"""GIFT-Eval's ``all_results.csv`` header, as in the leaderboard's ``results/<model>/all_results.csv``."""

MASE = "eval_metrics/MASE[0.5]"
CRPS = "eval_metrics/mean_weighted_sum_quantile_loss"
NORMALISER = "seasonal_naive"
RESULTS_FILE = "all_results.csv"
RUN_FILE = "run.json"

DOMAINS: dict[str, str] = {
    # GIFT-Eval's dataset_properties.json (keys after its renames)
    **dict.fromkeys(("m4_yearly", "m4_quarterly", "m4_monthly", "m4_weekly", "m4_daily", "m4_hourly"), "Econ/Fin"),
    **dict.fromkeys(("electricity", "solar", "ett1", "ett2"), "Energy"),
    **dict.fromkeys(("hospital", "covid_deaths", "us_births"), "Healthcare"),
    **dict.fromkeys(("saugeen", "temperature_rain", "kdd_cup_2018", "jena_weather"), "Nature"),
    **dict.fromkeys(("car_parts", "restaurant", "hierarchical_sales"), "Sales"),
    **dict.fromkeys(("loop_seattle", "sz_taxi", "m_dense"), "Transport"),
    **dict.fromkeys(
        ("bitbrains_fast_storage", "bitbrains_rnd", "bizitobs_application", "bizitobs_service", "bizitobs_l2c"),
        "Web/CloudOps",
    ),
    # our offline benchmark, in GIFT-Eval's seven domains
    **dict.fromkeys(("m3_yearly", "m3_quarterly", "m3_monthly", "m3_other", "nn3", "exchange_rate"), "Econ/Fin"),
    **dict.fromkeys(("tourism_yearly", "tourism_quarterly", "tourism_monthly"), "Econ/Fin"),
    **dict.fromkeys(("gefcom2012_load", "vic_elec"), "Energy"),
    "ili": "Healthcare",
    **dict.fromkeys(("nyc_taxi", "pedestrian", "traffic_volume"), "Transport"),
    "yosemite_temps": "Nature",
}
"""Domain of each dataset (the first part of the result key)."""


class EvaluationError(ValueError):
    """Bad input to the evaluator: the message says what and how to fix it."""


class BenchmarkError(EvaluationError):
    """The folder is not a benchmark root (no ``benchmark.json`` and no GIFT-Eval dataset folder)."""


class UnknownConfigError(EvaluationError):
    """A requested configuration is not in the benchmark."""


class UnknownModelError(EvaluationError):
    """A model name is neither a baseline, a built-in model nor a checkpoint folder."""


# ------------------------------------------------------------------------------------------------ metrics


def gift_eval_metrics() -> list[Any]:
    """GIFT-Eval's metric objects; ``mean_weighted_sum_quantile_loss`` over 0.1-0.9 is what it calls CRPS."""
    from gluonts.ev.metrics import MAE, MAPE, MASE, MSE, MSIS, ND, NRMSE, RMSE, SMAPE, MeanWeightedSumQuantileLoss

    return [
        MSE(forecast_type="mean"),
        MSE(forecast_type=0.5),
        MAE(forecast_type="mean"),
        MAE(),
        MASE(),
        MAPE(),
        SMAPE(),
        MSIS(),
        RMSE(),
        NRMSE(),
        ND(),
        MeanWeightedSumQuantileLoss(quantile_levels=list(QUANTILE_LEVELS)),
    ]


@contextmanager
def _gluonts_progress(desc: str, enabled: bool) -> Iterator[None]:
    """Label (or hide) the bare tqdm bar that ``gluonts.model.evaluation`` opens per call.

    gluonts offers no argument for it, so its module-level ``tqdm`` is swapped for the duration of one call.
    """
    import gluonts.model.evaluation as evaluation
    from tqdm.auto import tqdm

    original = evaluation.tqdm
    evaluation.tqdm = partial(tqdm, desc=desc, unit="series", leave=False, disable=not enabled)
    try:
        yield
    finally:
        evaluation.tqdm = original


def evaluate_predictor(
    predictor: Any, dataset: GiftEvalDataset, *, progress: bool = False, desc: str = ""
) -> dict[str, float]:
    """Score a gluonts predictor on one configuration with GIFT-Eval's arguments; returns ``{metric name: value}``.

    Example:
        >>> evaluate_predictor(predictor, GiftEvalDataset.per_variate("m4_hourly", root="bench"))["MASE[0.5]"]
        ... # doctest: +SKIP
        1.1932101877276544
    """
    from gluonts.model import evaluate_model

    with _gluonts_progress(desc or dataset.config_key, progress):
        frame = evaluate_model(
            predictor,
            test_data=dataset.test_data,
            metrics=gift_eval_metrics(),
            axis=None,
            mask_invalid_label=True,
            allow_nan_forecast=False,
            seasonality=dataset.season_length,
        )
    row = frame.reset_index(drop=True).iloc[0]
    return {name: float(row[name]) for name in METRIC_NAMES}


def domain_of(key: str) -> str:
    """Domain of a result key's dataset; ``"unknown"`` for datasets outside GIFT-Eval and our benchmark."""
    return DOMAINS.get(key.split("/")[0], "unknown")


def result_row(model: str, dataset: GiftEvalDataset, metrics: dict[str, float]) -> dict[str, Any]:
    """One ``all_results.csv`` row."""
    return {
        "dataset": dataset.config_key,
        "model": model,
        **{f"eval_metrics/{name}": metrics[name] for name in METRIC_NAMES},
        "domain": domain_of(dataset.config_key),
        "num_variates": dataset.target_dim,
    }


# ------------------------------------------------------------------------------------------------ models


@dataclass
class EvalModel:
    """A model to evaluate: its result name and how to build its predictor for a configuration."""

    name: str
    kind: str
    settings: dict[str, Any]
    make_predictor: Callable[[GiftEvalDataset], Any] = field(repr=False)


def resolve_model(
    spec: str, *, batch_size: int = 256, n_jobs: int = 1, device: str | None = None
) -> EvalModel:
    """A baseline name, ``"default"`` or a checkpoint folder -> :class:`EvalModel` (tsfm models are loaded once).

    Raises:
        UnknownModelError: ``spec`` is none of those, or the checkpoint cannot be loaded.
    """
    from .baselines import BASELINES, describe, make_baseline

    if spec in BASELINES:

        def baseline(ds: GiftEvalDataset) -> Any:
            return make_baseline(spec, ds.prediction_length, ds.season_length, n_jobs=n_jobs)

        return EvalModel(spec, "baseline", describe(spec), baseline)

    from tsfm.checkpoint import BUILTIN_MODELS, load_model

    if spec not in BUILTIN_MODELS and not Path(spec).is_dir():
        raise UnknownModelError(
            f"unknown model {spec!r}: use a baseline ({', '.join(BASELINES)}), a built-in model "
            f"({', '.join(BUILTIN_MODELS)}) or a tsfm checkpoint folder"
        )
    try:
        model = load_model(spec, device=device or "cpu")
    except (OSError, ValueError) as err:
        raise UnknownModelError(f"cannot load model {spec!r}: {err}") from None

    from .predictor import TsfmPredictor

    def tsfm_predictor(ds: GiftEvalDataset) -> Any:
        return TsfmPredictor(model, ds.prediction_length, batch_size=batch_size)

    name = f"tsfm-{spec}" if spec in BUILTIN_MODELS else Path(spec).resolve().name
    n_params = sum(p.numel() for p in model.parameters())
    settings = {"checkpoint": spec, "parameters": n_params, **_provenance(spec), **model.config.to_dict()}
    return EvalModel(name, "tsfm", settings, tsfm_predictor)


def _provenance(spec: str) -> dict[str, Any]:
    """Which weights were scored: the checkpoint's SHA-256 and its training command (a checkpoint named ``default``
    changes whenever the shipped model is retrained)."""
    import hashlib

    from tsfm.checkpoint import read_checkpoint_config, resolve_model_path, weight_files

    path = resolve_model_path(spec)
    sha = hashlib.sha256()
    for file in weight_files(path):
        sha.update(file.read_bytes())
    digest = sha.hexdigest()
    _, training = read_checkpoint_config(path)
    return {"weights_sha256": digest, "training_command": training.get("command")}


# ------------------------------------------------------------------------------------------------ configurations


def select_configs(root: str | os.PathLike[str], configs: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """The (dataset folder, term) pairs of a benchmark root, optionally narrowed to ``configs``.

    Args:
        root: a folder built by ``tsfm data build-benchmark`` (``benchmark.json``) or a GIFT-Eval download.
        configs: result keys (``m4_hourly/H/short``) or dataset folder names (``ett1/H``: all its terms).

    Raises:
        BenchmarkError: ``root`` is missing or holds neither ``benchmark.json`` nor any GIFT-Eval dataset.
        UnknownConfigError: a requested configuration is not in the benchmark (the message lists the known ones).
    """
    path = Path(root)
    if not path.is_dir():
        raise BenchmarkError(f"benchmark folder {path} does not exist")
    if not (path / BENCHMARK_FILE).is_file() and not any(is_dataset_dir(path / n) for n, _ in GIFT_EVAL_CONFIGS):
        raise BenchmarkError(
            f"{path} is not a benchmark: it has no {BENCHMARK_FILE} and none of GIFT-Eval's dataset folders; build "
            "one with `tsfm data build-benchmark --out DIR` or point at a GIFT-Eval download"
        )
    official = not (path / BENCHMARK_FILE).is_file()
    try:
        available = configurations(path, skip_missing=official)
    except FileNotFoundError as err:
        raise BenchmarkError(str(err)) from None
    if official and len(available) < len(GIFT_EVAL_CONFIGS):
        warnings.warn(
            f"{path}: {len(GIFT_EVAL_CONFIGS) - len(available)} of GIFT-Eval's {len(GIFT_EVAL_CONFIGS)} "
            f"configurations have no dataset folder; only the {len(available)} present are evaluated",
            UserWarning,
            stacklevel=2,
        )
    if not configs:
        return available
    keys = {key: config for config, key in config_keys(path, available).items()}
    chosen: list[tuple[str, str]] = []
    for wanted in configs:
        matches = [keys[wanted]] if wanted in keys else [(n, t) for n, t in available if n == wanted]
        if not matches:
            raise UnknownConfigError(
                f"unknown configuration {wanted!r} in {path}; choose result keys or dataset folders: "
                f"{', '.join(keys)}"
            )
        chosen.extend(m for m in matches if m not in chosen)
    return [c for c in available if c in chosen]


def config_keys(root: str | os.PathLike[str], available: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Result keys of configurations: from ``benchmark.json``, else from the names (reading the data's frequency
    only for a GIFT-Eval folder whose name carries none)."""
    listing = Path(root) / BENCHMARK_FILE
    if listing.is_file():
        return {(c["dataset"], c["term"]): c["key"] for c in json.loads(listing.read_text())["configurations"]}
    out = {}
    for name, term in available:
        try:
            out[(name, term)] = config_key(name, term)
        except ValueError:
            out[(name, term)] = GiftEvalDataset(name, term, root=root).config_key
    return out


# ------------------------------------------------------------------------------------------------ aggregation


def geometric_mean(values: Sequence[float] | np.ndarray | pd.Series) -> float:
    """``exp(mean(log(values)))``, the leaderboard's aggregate of normalised scores.

    Raises:
        ValueError: a value is not finite and positive (a ratio to Seasonal Naive always is, unless a metric broke).
    """
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        raise ValueError("geometric mean of no values")
    bad = ~(np.isfinite(array) & (array > 0))
    if bad.any():
        raise ValueError(f"geometric mean needs finite positive values, got {array[bad]}")
    return float(np.exp(np.mean(np.log(array))))


def normalise(results: pd.DataFrame, baseline: pd.DataFrame) -> pd.DataFrame:
    """Per configuration, each model's MASE and CRPS divided by the baseline's (Seasonal Naive) on the same key.

    Args:
        results: ``all_results.csv`` rows of one or more models.
        baseline: the normaliser's rows (one per ``dataset`` key).

    Returns:
        Columns ``dataset``, ``model``, ``term``, ``MASE``, ``CRPS`` (ratios); rows without a baseline value are
        dropped.
    """
    base = baseline.drop_duplicates("dataset", keep="last").set_index("dataset")
    merged = results[results["dataset"].isin(base.index)]
    return pd.DataFrame(
        {
            "dataset": merged["dataset"].to_numpy(),
            "model": merged["model"].to_numpy(),
            "term": merged["dataset"].str.rsplit("/", n=1).str[-1].to_numpy(),
            "MASE": (merged[MASE] / base.loc[merged["dataset"], MASE].to_numpy()).to_numpy(),
            "CRPS": (merged[CRPS] / base.loc[merged["dataset"], CRPS].to_numpy()).to_numpy(),
        }
    )


def summarise(normalised: pd.DataFrame) -> dict[str, dict[str, dict[str, float]]]:
    """Geometric means of normalised MASE and CRPS per model: ``{model: {"overall"|term: {"MASE", "CRPS", "n"}}}``.

    A ratio that is not finite and positive (a configuration where Seasonal Naive's in-sample error is zero makes
    MASE undefined) is left out of its metric's mean and counted in ``"excluded"``, so one degenerate
    configuration does not void a long run.
    """
    out: dict[str, dict[str, dict[str, float]]] = {}
    for model, rows in normalised.groupby("model", sort=False):
        groups = {"overall": rows, **{t.value: rows[rows["term"] == t.value] for t in Term}}
        out[str(model)] = {name: _means(g) for name, g in groups.items() if len(g)}
    return out


def _means(rows: pd.DataFrame) -> dict[str, float]:
    result: dict[str, float] = {"n": len(rows)}
    excluded = 0
    for metric in ("MASE", "CRPS"):
        values = rows[metric].to_numpy(dtype=np.float64)
        ok = np.isfinite(values) & (values > 0)
        excluded = max(excluded, int((~ok).sum()))
        result[metric] = geometric_mean(values[ok]) if ok.any() else math.nan
    if excluded:
        result["excluded"] = excluded
    return result


# ------------------------------------------------------------------------------------------------ results files


def read_results(path: str | os.PathLike[str]) -> pd.DataFrame:
    """An ``all_results.csv`` file, or every one below a folder, as one frame (GIFT-Eval's columns first)."""
    p = Path(path)
    files = [p] if p.is_file() else sorted(p.rglob(RESULTS_FILE)) if p.is_dir() else []
    if not files:
        raise FileNotFoundError(f"no {RESULTS_FILE} at {p}: run `tsfm evaluate ... --out DIR` first")
    frames = [pd.read_csv(f) for f in files]
    for f, frame in zip(files, frames, strict=True):
        missing = [c for c in ("dataset", "model", MASE, CRPS) if c not in frame.columns]
        if missing:
            raise EvaluationError(f"{f} is not a GIFT-Eval results file: columns {missing} are missing")
    return pd.concat(frames, ignore_index=True)


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    """Merge ``frame`` into ``path`` (rows with the same ``dataset`` key are replaced) and write it atomically."""
    if path.is_file():
        old = pd.read_csv(path)
        frame = pd.concat([old[~old["dataset"].isin(frame["dataset"])], frame], ignore_index=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    frame.loc[:, list(RESULT_COLUMNS)].to_csv(tmp, index=False)
    os.replace(tmp, path)


def _read_json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _write_json(payload: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def machine() -> dict[str, Any]:
    """What the wall times were measured on."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    except ImportError:  # pragma: no cover - torch is a tsfm dependency
        pass
    return info


def _benchmark_build_seconds(root: Path) -> float | None:
    listing = root / BENCHMARK_FILE
    if listing.is_file():
        return json.loads(listing.read_text()).get("build_seconds")
    return None


# ------------------------------------------------------------------------------------------------ the run


def evaluate(
    models: Sequence[str],
    benchmark: str | os.PathLike[str],
    *,
    configs: Sequence[str] | None = None,
    out: str | os.PathLike[str] | None = None,
    batch_size: int = 256,
    n_jobs: int = 1,
    device: str | None = None,
    progress: bool = True,
    command: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Evaluate ``models`` on the configurations of ``benchmark``; write results under ``out`` when given.

    Seasonal Naive (statsforecast, with quantiles) is run on every configuration as the normaliser, once, whether or
    not it is among ``models``. Results are written after each configuration, merged into existing files (rows of the
    same key replaced), so an interrupted run keeps what it finished and runs over subsets add up.

    Returns:
        ``{model name: {"rows": DataFrame of all_results rows, "run": the run.json payload}}``.

    Raises:
        BenchmarkError, UnknownConfigError, UnknownModelError: bad input, before anything is computed.
    """
    from tqdm.auto import tqdm

    root = Path(benchmark)
    chosen = select_configs(root, configs)
    runners = [resolve_model(m, batch_size=batch_size, n_jobs=n_jobs, device=device) for m in models]
    names = [r.name for r in runners]
    if len(set(names)) != len(names):
        raise UnknownModelError(f"two models share a result name: {names}")
    normaliser = next((r for r in runners if r.name == NORMALISER), None) or resolve_model(NORMALISER, n_jobs=n_jobs)

    rows: dict[str, list[dict[str, Any]]] = {r.name: [] for r in runners}
    seconds: dict[str, dict[str, float]] = {r.name: {} for r in runners}
    base_rows: list[dict[str, Any]] = []
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    context = {"root": root, "chosen": len(chosen), "started": started, "command": command, "tic": time.perf_counter()}
    previous = {r.name: _read_json(Path(out) / r.name / RUN_FILE) if out is not None else None for r in runners}
    bar = tqdm(chosen, desc="configurations", unit="config", disable=not progress)
    for name, term in bar:
        ds = GiftEvalDataset.per_variate(name, term, root=root)
        bar.set_postfix_str(ds.config_key)
        for runner in [normaliser, *(r for r in runners if r is not normaliser)]:
            t0 = time.perf_counter()
            metrics = evaluate_predictor(
                runner.make_predictor(ds), ds, progress=progress, desc=f"{runner.name} {ds.config_key}"
            )
            row = result_row(runner.name, ds, metrics)
            if runner is normaliser:
                base_rows.append(row)
            if runner.name in rows:
                rows[runner.name].append(row)
                seconds[runner.name][ds.config_key] = round(time.perf_counter() - t0, 3)
        if out is not None:  # after every configuration, so a crash or an interrupt keeps what was done
            for runner in runners:
                _write_csv(pd.DataFrame(rows[runner.name][-1:]), Path(out) / runner.name / RESULTS_FILE)
                run = _run_payload(runner, rows[runner.name], seconds[runner.name], base_rows, context)
                _write_run(run, out, previous[runner.name])

    report: dict[str, dict[str, Any]] = {}
    for runner in runners:
        run = _run_payload(runner, rows[runner.name], seconds[runner.name], base_rows, context)
        if out is not None:
            run = _write_run(run, out, previous[runner.name])
        report[runner.name] = {"rows": pd.DataFrame(rows[runner.name], columns=list(RESULT_COLUMNS)), "run": run}
    return report


def _run_payload(
    runner: EvalModel,
    rows: list[dict[str, Any]],
    seconds: dict[str, float],
    base_rows: list[dict[str, Any]],
    context: dict[str, Any],
) -> dict[str, Any]:
    """The ``run.json`` of one model so far: settings, times, normalised values, geometric means, provenance."""
    root: Path = context["root"]
    frame = pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
    norm = normalise(frame, pd.DataFrame(base_rows, columns=list(RESULT_COLUMNS)))
    return {
        "model": runner.name,
        "kind": runner.kind,
        "settings": runner.settings,
        "benchmark": str(root.resolve()),
        "benchmark_build_seconds": _benchmark_build_seconds(root),
        "configurations": len(seconds),
        "configurations_requested": context["chosen"],
        "wall_seconds": round(sum(seconds.values()), 1),
        "command_wall_seconds": round(time.perf_counter() - context["tic"], 1),
        "seconds_per_configuration": dict(seconds),
        "normalised": {r.dataset: {"MASE": r.MASE, "CRPS": r.CRPS} for r in norm.itertuples(index=False)},
        "geometric_mean": summarise(norm).get(runner.name, {}),
        "normaliser": "seasonal_naive (statsforecast, 9 quantile levels), run on the same configurations",
        "command": context["command"],
        "started": context["started"],
        "machine": machine(),
        "versions": _versions(),
    }


def _write_run(run: dict[str, Any], out: str | os.PathLike[str], previous: dict[str, Any] | None) -> dict[str, Any]:
    """Write ``OUT/<model>/run.json``: this run folded into ``previous`` (the file as it was before this run began,
    see :func:`_merge_runs`), as rows are merged into ``all_results.csv``; returns what was written."""
    if previous is not None:
        run = _merge_runs(previous, run)
    _write_json(run, Path(out) / run["model"] / RUN_FILE)
    return run


def _merge_runs(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Fold an earlier ``run.json`` of the same model and benchmark into a new one, as the rows of
    ``all_results.csv`` are merged: per-configuration times and ratios are united (new ones win) and the totals and
    geometric means recomputed; the commands of both runs are kept."""
    if old.get("model") != new["model"] or old.get("benchmark") != new["benchmark"]:
        return new
    seconds = {**old.get("seconds_per_configuration", {}), **new["seconds_per_configuration"]}
    ratios = {**old.get("normalised", {}), **new["normalised"]}
    norm = pd.DataFrame(
        [(key, new["model"], key.rsplit("/", 1)[-1], v["MASE"], v["CRPS"]) for key, v in ratios.items()],
        columns=["dataset", "model", "term", "MASE", "CRPS"],
    )
    commands = [*old.get("commands", [old.get("command")]), new["command"]]
    return {
        **new,
        "configurations": len(seconds),
        "wall_seconds": round(sum(seconds.values()), 1),
        "seconds_per_configuration": seconds,
        "normalised": ratios,
        "geometric_mean": summarise(norm).get(new["model"], {}) if len(norm) else {},
        "commands": [c for c in dict.fromkeys(commands) if c],
    }


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for package in ("tsfm", "gluonts", "statsforecast", "numpy", "pandas"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            continue
    return out


def format_summary(report: dict[str, dict[str, Any]]) -> str:
    """A plain-text table of the geometric means and wall times, printed last by ``tsfm evaluate``."""
    lines = [f"{'model':24s} {'configs':>7s} {'MASE/SN':>8s} {'CRPS/SN':>8s} {'wall s':>8s}"]
    for name, item in report.items():
        run = item["run"]
        overall = run["geometric_mean"].get("overall", {})
        mase, crps = overall.get("MASE", math.nan), overall.get("CRPS", math.nan)
        lines.append(
            f"{name:24s} {run['configurations']:>7d} {mase:>8.3f} {crps:>8.3f} {run['wall_seconds']:>8.1f}"
        )
    return "\n".join(lines)
