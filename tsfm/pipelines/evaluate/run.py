"""An evaluation run: every model on every chosen configuration, Seasonal Naive alongside as the normaliser, results
written after each configuration so that an interrupted run keeps what it finished."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ..data.gift_eval import GiftEvalDataset
from .aggregate import NORMALISER, normalise, summarise
from .configs import select_configs
from .errors import UnknownModelError
from .models import EvalModel, eval_model
from .protocol import RESULT_COLUMNS, evaluate_predictor, result_row
from .results import (
    RESULTS_FILE,
    RUN_FILE,
    benchmark_build_seconds,
    machine,
    read_json,
    versions,
    write_results_csv,
    write_run,
)


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
    runners = [eval_model(m, batch_size=batch_size, n_jobs=n_jobs, device=device) for m in models]
    names = [r.name for r in runners]
    if len(set(names)) != len(names):
        raise UnknownModelError(f"two models share a result name: {names}")
    normaliser = next((r for r in runners if r.name == NORMALISER), None) or eval_model(NORMALISER, n_jobs=n_jobs)

    rows: dict[str, list[dict[str, Any]]] = {r.name: [] for r in runners}
    seconds: dict[str, dict[str, float]] = {r.name: {} for r in runners}
    base_rows: list[dict[str, Any]] = []
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    context = {"root": root, "chosen": len(chosen), "started": started, "command": command, "tic": time.perf_counter()}
    previous = {r.name: read_json(Path(out) / r.name / RUN_FILE) if out is not None else None for r in runners}
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
                write_results_csv(pd.DataFrame(rows[runner.name][-1:]), Path(out) / runner.name / RESULTS_FILE)
                run = _run_payload(runner, rows[runner.name], seconds[runner.name], base_rows, context)
                write_run(run, out, previous[runner.name])

    report: dict[str, dict[str, Any]] = {}
    for runner in runners:
        run = _run_payload(runner, rows[runner.name], seconds[runner.name], base_rows, context)
        if out is not None:
            run = write_run(run, out, previous[runner.name])
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
        "benchmark_build_seconds": benchmark_build_seconds(root),
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
        "versions": versions(),
    }
