"""The scaling sweep: every backbone trained with one recipe at each preset, scored zero-shot, one CSV row per
configuration.

The recipe is fixed per preset (:data:`RECIPES`: batch, learning rate, token budget) and shared by every backbone
at that preset, so a difference between rows of one preset is a difference of sequence mixers, not of training.
The token budget per preset and why it is capped at 40M and 80M are :data:`BUDGET_RULE` (printed in the report;
``--tokens`` overrides a budget).

Every run trains with the pretraining recipe's horizon embedding on the masked future tokens and is scored with
each of ``decodings`` (masked and autoregressive by default; a ``decoding`` column tells the rows apart): mixers
differ in which suits them (the mLSTM-heavy ``xlstm[3:1]`` loses its masked tokens to the context mean at short
budgets, where autoregressive decoding holds; benchmarks/RESULTS.md), and a sweep scored one way only would
measure the decoding as much as the mixer.

A sweep is resumable run by run: a run whose rows are already in ``results.csv`` is skipped, and a run interrupted
mid-way resumes from its own ``last.ckpt`` (see :mod:`tsfm.pipelines.train`). Runs can go side by side on one GPU
(``parallel``): each is a child process (``python -m tsfm.pipelines.sweep --one ...``), because small models cannot
fill an H200 alone.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BUDGET_RULE", "RECIPES", "Recipe", "SweepError", "SweepRun", "plan_runs", "run_sweep"]


class SweepError(ValueError):
    """A sweep request that cannot run (bad backbone, preset, budget or output folder); raised before compute."""


@dataclass(frozen=True)
class Recipe:
    """What every backbone gets at one preset."""

    batch_size: int
    learning_rate: float
    tokens: float
    warmup_steps: int = 200


#: Per preset: batch, peak learning rate (smaller for larger models, as usual for AdamW) and token budget.
RECIPES: dict[str, Recipe] = {
    "1M": Recipe(batch_size=256, learning_rate=2e-3, tokens=12e6),
    "3M": Recipe(batch_size=256, learning_rate=1.5e-3, tokens=30e6),
    "10M": Recipe(batch_size=512, learning_rate=1e-3, tokens=80e6),
    "20M": Recipe(batch_size=512, learning_rate=8e-4, tokens=130e6),  # not in the study's five; the default's size cap
    "40M": Recipe(batch_size=512, learning_rate=6e-4, tokens=90e6),  # capped by device time: BUDGET_RULE
    "80M": Recipe(batch_size=512, learning_rate=4e-4, tokens=90e6),
}

BUDGET_RULE = (
    "Every backbone at a preset gets the same recipe and token budget (patch tokens: context plus future tokens of "
    "every window). The budget grows with scale up to 10M (12M, 30M, 80M tokens) and is capped at 90M tokens for 40M "
    "and 80M: a run must finish within one session's 30 minutes of GPU time, since its Lightning checkpoint (12 "
    "bytes per parameter) cannot leave the machine; the runs of one preset may go in different sessions. So 40M "
    "and 80M are compared with each other and with 10M at a near-equal budget, far below compute-optimal (about 2 "
    "and 1 tokens per parameter): differences between backbones at a preset are the mixers', the slope beyond 10M is "
    "budget-limited."
)


@dataclass(frozen=True)
class SweepRun:
    """One cell of the grid."""

    backbone: str
    preset: str
    seed: int = 0

    @property
    def name(self) -> str:
        return f"{re.sub(r'[^A-Za-z0-9]+', '_', self.backbone).strip('_')}-{self.preset}-s{self.seed}"


def plan_runs(backbones: Sequence[str], presets: Sequence[str], seeds: Sequence[int] = (0,)) -> list[SweepRun]:
    """The grid, smallest presets first (so a partial sweep has complete small scales), checked before compute."""
    from tsfm.backbones import available_backbones
    from tsfm.presets import PRESET_TARGETS, preset_config

    unknown = [p for p in presets if p not in PRESET_TARGETS]
    if unknown:
        raise SweepError(f"unknown preset(s) {unknown}; choose from {', '.join(PRESET_TARGETS)}")
    for backbone in backbones:
        try:
            preset_config(backbone, presets[0] if presets else "1M")
        except (KeyError, ValueError) as err:
            raise SweepError(f"unknown backbone {backbone!r} ({err}); registered: "
                             f"{', '.join(available_backbones())}") from None
    order = {p: i for i, p in enumerate(PRESET_TARGETS)}
    return [SweepRun(b, p, s) for p in sorted(presets, key=order.__getitem__) for s in seeds for b in backbones]


def _steps(run: SweepRun, recipe: Recipe, tokens_per_window: int) -> int:
    steps = math.floor(recipe.tokens / (recipe.batch_size * tokens_per_window))
    if steps < 1:
        raise SweepError(f"a budget of {recipe.tokens:.3g} tokens does not fit one step of {run.name} "
                         f"({recipe.batch_size} windows x {tokens_per_window} tokens)")
    return steps


@dataclass(frozen=True)
class SweepSettings:
    """What the whole sweep shares besides the per-preset recipe."""

    out: Path
    real_data: Path | None
    benchmark: Path
    normaliser: Path
    context_length: int = 2048
    horizon_patches: int = 24
    synthetic_share: float = 0.5
    max_minutes: float | None = None
    max_series_length: int | None = None
    horizon_embedding: bool = True
    decodings: tuple[str, ...] = ("masked", "autoregressive")
    recipes: dict[str, Recipe] = dataclasses.field(default_factory=lambda: dict(RECIPES))
    model_changes: dict[str, Any] = dataclasses.field(default_factory=dict)  # e.g. tiny models for tests
    configs: list[str] | None = None  # score on these benchmark configurations only (default: all)
    read_alone_rows: bool = False  # also the rows of short contexts read alone (READ_ALONE), as before session 14
    devices: int = 1  # data-parallel devices per run (TrainConfig.devices; the recipe's batch stays global)
    compile: bool = False  # torch.compile each run's loss (TrainConfig.compile): the same math, faster steps


def _configs(run: SweepRun, settings: SweepSettings) -> tuple[Any, Any]:
    from tsfm.pipelines.train import TrainConfig
    from tsfm.presets import preset_config

    model_config = preset_config(run.backbone, run.preset, context_length=max(2048, settings.context_length),
                                 train_horizon_patches=settings.horizon_patches,
                                 horizon_embedding=settings.horizon_embedding).replace(**settings.model_changes)
    recipe = settings.recipes[run.preset]
    tokens_per_window = settings.context_length // model_config.patch_size + settings.horizon_patches
    steps = _steps(run, recipe, tokens_per_window)
    train_config = TrainConfig(
        steps=steps, batch_size=recipe.batch_size, learning_rate=recipe.learning_rate,
        warmup_steps=min(recipe.warmup_steps, max(1, steps // 10)), context_length=settings.context_length,
        synthetic_share=settings.synthetic_share, seed=run.seed, val_every=max(1, steps // 8),
        checkpoint_every=max(1, steps // 8), max_minutes=settings.max_minutes,
        precision="bf16-mixed" if _cuda() else "32-true", devices=settings.devices, compile=settings.compile,
    )
    return model_config, train_config


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def results_path(settings: SweepSettings) -> Path:
    return settings.out / "results.csv"


def finished_runs(settings: SweepSettings) -> set[str]:
    """Names of runs whose rows are in ``results.csv``."""
    import pandas as pd

    path = results_path(settings)
    if not path.is_file():
        return set()
    return set(pd.read_csv(path)["run"].astype(str))


def recipes_record(recipes: dict[str, Recipe]) -> dict[str, dict[str, float]]:
    """Recipes as ``sweep.json`` records them (and a child run receives them): per preset, the recipe's fields."""
    return {preset: dataclasses.asdict(recipe) for preset, recipe in sorted(recipes.items())}


def recorded_recipes(marker: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The recipes a sweep's ``sweep.json`` records; one written before they were recorded stands for the recipe
    table of its day, :data:`RECIPES`."""
    return marker.get("recipes") or recipes_record(RECIPES)


def check_out_folder(settings: SweepSettings) -> None:
    """Refuse an output folder that holds another sweep (other data, benchmark, context, horizon or recipes).

    The recipes (batch, learning rate, token budget per preset) are part of a sweep's identity: a run of another
    budget under the same name would otherwise be skipped as finished (:func:`recorded_recipes`).
    """
    marker = settings.out / "sweep.json"
    ours = {"real_data": str(settings.real_data), "benchmark": str(settings.benchmark),
            "context_length": settings.context_length, "horizon_patches": settings.horizon_patches,
            "synthetic_share": settings.synthetic_share, "horizon_embedding": settings.horizon_embedding,
            "decodings": list(settings.decodings), "recipes": recipes_record(settings.recipes)}
    if marker.is_file():
        theirs = json.loads(marker.read_text())
        theirs["recipes"] = recorded_recipes(theirs)
        changed = sorted(k for k in ours if theirs.get(k) != ours[k])
        if changed:
            presets = sorted(p for p in {*ours["recipes"], *theirs["recipes"]}
                             if ours["recipes"].get(p) != theirs["recipes"].get(p))
            named = [f"recipes ({', '.join(presets)})" if k == "recipes" else k for k in changed]
            raise SweepError(f"{settings.out} holds another sweep's results (different {', '.join(named)}); "
                             "use a new --out")
    elif results_path(settings).is_file():
        raise SweepError(f"{settings.out} holds a results.csv that no sweep.json describes; use a new --out")
    settings.out.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(ours, indent=2) + "\n")


SHORT_CONTEXTS = "after missing patches"
"""The ``short_contexts`` column: how scoring read a context shorter than the trained window. Since the fourteenth
session ``Forecaster.read_context`` reads it after the fully missing patches that filled it in training; rows without
the column were scored before and read it alone, which changes the short-history configurations (M3, NN3, tourism,
``m4_hourly``), so the report never pools the two (``sweep_report.read_sweep``)."""


READ_ALONE = "alone"
"""The ``short_contexts`` value of rows scored with ``ModelConfig.pad_short_contexts`` off: a context shorter than
the trained window read alone, as every row before the fourteenth session was. Those rows' weights were not kept, so
they cannot be re-scored; a later run scored this way too (``SweepSettings.read_alone_rows``) sits in their tables,
and the scaling tables stay one measurement from 1M up."""


def train_and_score(run: SweepRun, settings: SweepSettings, *, progress: bool = False) -> list[dict[str, Any]]:
    """Train one run (resuming it if interrupted), score its validation-chosen checkpoint zero-shot, and return
    one row per benchmark configuration."""
    from tsfm.pipelines.data.corpus import load_corpus
    from tsfm.pipelines.evaluate import with_inference
    from tsfm.pipelines.train import is_main_process, train

    model_config, train_config = _configs(run, settings)
    real = validation = None
    if settings.real_data is not None:
        real, validation = load_corpus(settings.real_data, max_length=settings.max_series_length)
    run_dir = settings.out / "runs" / run.name
    started = time.monotonic()
    model_path = train(model_config, train_config, run_dir, real=real, validation=validation,
                       data_description=f"sweep {run.name}", progress=progress)
    if not is_main_process():
        return []  # another process of a data-parallel run: rank 0 scores and writes the rows
    provenance = json.loads((run_dir / "provenance.json").read_text())
    if provenance["steps"] < train_config.steps:
        return []  # stopped by the time budget: resumed by the next call, scored then
    rows = []
    for decoding in settings.decodings:  # one set of weights, scored with each decoding (masked suits some mixers)
        scored = run_dir / f"model-{decoding}"
        if not scored.exists():
            with_inference(model_path, scored, decoding=decoding)
        padded = score_checkpoint(scored, run.name, settings.benchmark, settings.normaliser, configs=settings.configs,
                                  workers=_score_workers())
        rows += [{"decoding": decoding, "short_contexts": SHORT_CONTEXTS, **row} for row in padded]
        if settings.read_alone_rows:
            rows += [{"decoding": decoding, "short_contexts": READ_ALONE, **row}
                     for row in _score_read_alone(model_path, run_dir / f"model-{decoding}-alone", decoding, padded,
                                                  run.name, settings, model_config.context_length)]
    common = {
        "run": run.name, "backbone": run.backbone, "preset": run.preset, "seed": run.seed,
        "parameters": provenance["num_parameters"], "tokens_seen": provenance["tokens_seen"],
        "steps": provenance["steps"], "batch_size": train_config.batch_size,
        "train_seconds": provenance["train_seconds"], "wall_seconds_this_call": round(time.monotonic() - started, 1),
        "tokens_per_s": round(provenance["tokens_seen"] / max(provenance["train_seconds"], 1e-9)),
        "train_loss": provenance["final_train_loss"], "val_loss": provenance["best_val_loss"],
        "device": provenance["device"],
    }
    return [{**common, **row} for row in rows]


def _score_read_alone(model_path: Path, folder: Path, decoding: str, padded: list[dict[str, Any]], name: str,
                      settings: SweepSettings, context_length: int) -> list[dict[str, Any]]:
    """``padded``'s rows as a model reading short contexts alone scores them: configurations whose first test
    window has a shorter context than ``context_length`` are scored again with ``pad_short_contexts`` off; the
    others' rows are ``padded``'s, since a context of the full window has no missing tokens to read or skip."""
    from tsfm.pipelines.data.gift_eval import GiftEvalDataset
    from tsfm.pipelines.evaluate import select_configs, with_inference

    short = []
    for dataset, term in select_configs(settings.benchmark, settings.configs):
        ds = GiftEvalDataset.per_variate(dataset, term, root=settings.benchmark)
        if ds.min_series_length - ds.prediction_length * ds.windows < context_length:
            short.append(ds.config_key)
    if not short:
        return [dict(row) for row in padded]
    if not folder.exists():
        with_inference(model_path, folder, decoding=decoding, pad_short_contexts=False)
    alone = {row["dataset"]: row for row in score_checkpoint(folder, name, settings.benchmark, settings.normaliser,
                                                             configs=short, workers=_score_workers())}
    return [dict(alone.get(row["dataset"], row)) for row in padded]


def score_checkpoint(model: str | os.PathLike[str], name: str, benchmark: Path, normaliser: Path, *,
                     configs: Sequence[str] | None = None, device: str | None = None,
                     batch_size: int = 512, workers: int = 1) -> list[dict[str, Any]]:
    """GIFT-Eval rows of a checkpoint on every configuration of ``benchmark``, each with its MASE and CRPS divided
    by the Seasonal-Naive row of ``normaliser`` (a committed ``all_results.csv``: Seasonal Naive is deterministic,
    so its rows need not be recomputed where statsforecast is not installed, e.g. the GPU machine).

    ``workers`` above 1 computes each configuration's metrics (gluonts, on one CPU core) in a pool of that many
    processes while this one makes the next configuration's forecasts: on a GPU machine the metrics are more than
    half of a pass (``benchmarks/results/gpu-2026-12-06-session31``). The rows are the same either way.
    """
    from concurrent.futures import Future, ProcessPoolExecutor
    from multiprocessing import get_context

    import pandas as pd

    from tsfm.pipelines.data.gift_eval import GiftEvalDataset
    from tsfm.pipelines.evaluate import (
        CRPS,
        MASE,
        eval_model,
        evaluate_forecasts,
        read_results,
        result_row,
        select_configs,
    )

    if workers > 1:
        _check_spawnable_main()
    runner = eval_model(str(model), batch_size=batch_size, device=device or ("cuda" if _cuda() else "cpu"))
    base = read_results(normaliser).drop_duplicates("dataset", keep="last").set_index("dataset")
    # spawn: a forked child would inherit this process's CUDA context and torch threads
    pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn")) if workers > 1 else None
    scored: list[tuple[GiftEvalDataset, Future[dict[str, float]] | dict[str, float]]] = []
    try:
        for dataset, term in select_configs(benchmark, configs):
            ds = GiftEvalDataset.per_variate(dataset, term, root=benchmark)
            forecasts = runner.make_predictor(ds).predict(ds.rolling_windows(1).input)
            if pool is None:
                scored.append((ds, evaluate_forecasts(forecasts, ds)))
            else:  # the worker reads the configuration itself: a dataset object is not sent across
                scored.append((ds, pool.submit(_metrics_in_worker, list(forecasts), dataset, term, benchmark)))
        results = [(ds, metrics if isinstance(metrics, dict) else metrics.result()) for ds, metrics in scored]
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    rows = []
    for ds, metrics in results:
        row = result_row(name, ds, metrics)
        key = row["dataset"]
        row["MASE_normalised"] = row[MASE] / base.loc[key, MASE] if key in base.index else float("nan")
        row["CRPS_normalised"] = row[CRPS] / base.loc[key, CRPS] if key in base.index else float("nan")
        rows.append(row)
    return pd.DataFrame(rows).to_dict("records")


def _check_spawnable_main() -> None:
    """Refuse a metric pool that cannot start, before any forecast is made: a spawned worker re-runs the parent's
    ``__main__`` from its file, and a program read from standard input (``python - <<EOF``) names a file that does
    not exist (``<stdin>``), so every worker dies at start and the pool breaks only after the forecasts."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if getattr(main, "__spec__", None) is None and path is not None and not Path(path).is_file():
        raise SweepError(f"workers > 1 starts processes that re-read this program's main file, and {path!r} is not "
                         "one (a program read from standard input?): run it from a file or as `python -m`, or "
                         "pass workers=1")


def _score_workers() -> int:
    """Metric processes for a run's scoring (``score_checkpoint``'s ``workers``): on a GPU machine, the cores this run
    may use (its share beside side-by-side runs: ``OMP_NUM_THREADS``, as ``_child_env`` sets it) less the one making
    forecasts, at most 8; on a CPU one, where the forecasts need every core, none beside this process."""
    if not _cuda():
        return 1
    share = int(os.environ.get("OMP_NUM_THREADS") or _host_cores())
    return max(1, min(8, share - 1))


def _metrics_in_worker(forecasts: Any, dataset: str, term: str, benchmark: Path) -> dict[str, float]:
    """GIFT-Eval's metrics of one configuration's test-window forecasts, in a scoring pool's worker."""
    from tsfm.pipelines.data.gift_eval import GiftEvalDataset
    from tsfm.pipelines.evaluate import evaluate_forecasts

    return evaluate_forecasts(forecasts, GiftEvalDataset.per_variate(dataset, term, root=benchmark))


def append_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """Append ``rows`` to the CSV at ``path`` (atomically, through a temporary file).

    The rows already there stay byte for byte: a rewrite through pandas would print their floats as the writing
    machine's pandas does (the device's differs in the last digit), a diff of every committed row. Rows that bring
    a column the header lacks extend the header at its end, and every earlier row by as many empty fields.
    """
    import pandas as pd

    frame = pd.DataFrame(rows)
    tmp = path.with_suffix(".tmp")
    if not path.is_file() or not path.read_text().strip():
        frame.to_csv(tmp, index=False, lineterminator="\n")
        tmp.replace(path)
        return
    text = path.read_text()
    lines = text.splitlines()
    header = next(csv.reader([lines[0]]))
    added = [c for c in frame.columns if c not in header]
    if added:
        if sum(1 for _ in csv.reader(lines)) != len(lines):
            raise ValueError(f"{path}: a field spans lines, so the rows cannot be extended in place")
        extension = "," * len(added)
        names = io.StringIO()
        csv.writer(names, lineterminator="").writerow(added)
        text = "\n".join([f"{lines[0]},{names.getvalue()}", *(line + extension for line in lines[1:])])
        header += added
    tmp.write_text(text + ("" if text.endswith("\n") else "\n")
                   + frame.reindex(columns=header).to_csv(index=False, header=False, lineterminator="\n"))
    tmp.replace(path)


def _child_command(run: SweepRun, settings: SweepSettings) -> list[str]:
    payload = {"run": dataclasses.asdict(run), "settings": {
        **{k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(settings).items()
           if k != "recipes"},
        "recipes": recipes_record(settings.recipes)}}
    return [sys.executable, "-m", "tsfm.pipelines.sweep", "--one", json.dumps(payload)]


def _child_env(parallel: int) -> dict[str, str]:
    """The environment of a side-by-side run: the host's cores shared out (``OMP_NUM_THREADS``, unless the caller set
    it), since each of ``parallel`` processes would otherwise start one CPU thread per core for its host-side work
    (scoring, metrics) and oversubscribe the host N-fold."""
    return {"OMP_NUM_THREADS": str(max(1, _host_cores() // max(1, parallel))), **os.environ}


def _host_cores() -> int:
    """The cores this process may run on (its affinity where the platform tells it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _settings_from(payload: dict[str, Any]) -> SweepSettings:
    raw = dict(payload)
    recipes = {k: Recipe(**v) for k, v in raw.pop("recipes").items()}
    for key in ("out", "benchmark", "normaliser", "real_data"):
        raw[key] = Path(raw[key]) if raw.get(key) not in (None, "None") else None
    raw["decodings"] = tuple(raw["decodings"])
    return SweepSettings(**raw, recipes=recipes)


def run_sweep(runs: Sequence[SweepRun], settings: SweepSettings, *, parallel: int = 1,
              progress: bool = True) -> list[str]:
    """Train and score every run not yet in ``results.csv``; returns the names of the runs finished now.

    With ``parallel > 1`` runs go side by side, each in a child process; rows are appended by this process only,
    as each child finishes (its rows come back in ``runs/<name>/rows.json``). With ``settings.devices > 1`` each
    run trains data-parallel: every process of it goes through this loop (Lightning re-ran the command line to
    start them), training together, while only rank 0 scores runs and appends rows; the others wait for it at the
    next run's start.
    """
    if parallel > 1 and settings.devices > 1:
        raise SweepError("parallel runs and several devices per run do not combine: choose one")
    from tsfm.config import DECODINGS

    unknown = [d for d in settings.decodings if d not in DECODINGS]
    if not settings.decodings or unknown:
        raise SweepError(f"decodings must be some of {', '.join(DECODINGS)}, got {list(settings.decodings)}")
    for run in runs:
        _configs(run, settings)  # budget and settings errors before any compute, and before the folder is claimed
    check_out_folder(settings)
    done = finished_runs(settings)
    todo = [r for r in runs if r.name not in done]
    finished: list[str] = []
    if parallel <= 1:
        for run in todo:
            rows = train_and_score(run, settings, progress=progress)
            if rows:
                append_rows(results_path(settings), rows)
                finished.append(run.name)
        return finished
    pending = list(todo)
    active: dict[str, subprocess.Popen] = {}
    env = _child_env(parallel)
    while pending or active:
        while pending and len(active) < parallel:
            run = pending.pop(0)
            log = settings.out / "runs" / f"{run.name}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(log, "a") as fh:
                active[run.name] = subprocess.Popen(_child_command(run, settings), stdout=fh, stderr=fh, env=env)
        time.sleep(1.0)
        for name, proc in list(active.items()):
            if proc.poll() is None:
                continue
            del active[name]
            rows_file = settings.out / "runs" / name / "rows.json"
            if proc.returncode != 0:
                print(f"{name}: failed (exit {proc.returncode}), see {settings.out / 'runs' / (name + '.log')}",
                      file=sys.stderr)
            elif rows_file.is_file():
                rows = json.loads(rows_file.read_text())
                if rows:
                    append_rows(results_path(settings), rows)
                    finished.append(name)
    return finished


def _child_main(payload_text: str) -> int:
    payload = json.loads(payload_text)
    run, settings = SweepRun(**payload["run"]), _settings_from(payload["settings"])
    rows = train_and_score(run, settings)
    out = settings.out / "runs" / run.name / "rows.json"
    out.write_text(json.dumps(rows))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="one sweep run (used by run_sweep for side-by-side runs)")
    parser.add_argument("--one", required=True, help="JSON of the run and the sweep settings")
    sys.exit(_child_main(parser.parse_args().one))
