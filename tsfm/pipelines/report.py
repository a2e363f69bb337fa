"""Benchmark reports: Markdown tables, normalised geometric means, win rates and plots from ``all_results.csv`` files.

``write_report(["reports/results"], "reports", name="baselines")`` reads the results of ``tsfm evaluate`` (one
``all_results.csv`` and ``run.json`` per model) and writes ``reports/baselines.md`` with

- one row per configuration and one column per model, raw MASE[0.5] and CRPS, then both divided by Seasonal Naive;
- the geometric means of the normalised values, overall, per term and per frequency (how GIFT-Eval's leaderboard
  ranks and breaks down models);
- win rates of every model against every baseline (share of configurations where it scores lower; ties count half);
- the wall times and exact commands recorded in each ``run.json``;

and PNGs: ``NAME_normalised.png`` (normalised MASE and CRPS per configuration) and, when a benchmark is given,
``NAME_examples.png`` (forecast examples with quantile bands), plus ``NAME_normalised.csv``.

Seasonal Naive's rows must be among the results: it is the normaliser. This module computes nothing but the example
forecasts; the protocol and the aggregation functions are :mod:`tsfm.pipelines.evaluate`. matplotlib is used through
``Figure`` and the Agg canvas, never pyplot, so callers' figures and backends are left alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .data.frequency import step_duration
from .data.gift_eval import GiftEvalDataset
from .evaluate import (
    CRPS,
    MASE,
    NORMALISER,
    RUN_FILE,
    EvaluationError,
    config_keys,
    eval_model,
    normalise,
    paired_ratio_interval,
    read_results,
    select_configs,
    summarise,
    summarise_by_frequency,
)

__all__ = ["BASELINE_ORDER", "markdown_report", "model_order", "win_rates", "write_report"]

BASELINE_ORDER: tuple[str, ...] = ("naive", "seasonal_naive", "auto_ets", "auto_arima", "auto_theta")
EXAMPLE_CONFIGS = 4
EXAMPLE_HISTORY = 3  # prediction lengths of history drawn before each forecast
BANDS: tuple[tuple[str, str], ...] = (("0.1", "0.9"), ("0.2", "0.8"), ("0.3", "0.7"))
DPI = 72  # small PNGs: they are committed


def model_order(models: Sequence[str]) -> list[str]:
    """Baselines first in a fixed order, then the other models by name."""
    names = list(dict.fromkeys(models))
    return [m for m in BASELINE_ORDER if m in names] + sorted(m for m in names if m not in BASELINE_ORDER)


def win_rates(results: pd.DataFrame, column: str, baselines: Sequence[str]) -> pd.DataFrame:
    """Share of configurations where each model's ``column`` is lower than each baseline's (ties count half).

    Returns:
        models x baselines; only configurations both have are counted; NaN for a model against itself.
    """
    table = results.pivot_table(index="dataset", columns="model", values=column, aggfunc="last")
    models = model_order(table.columns)
    out = pd.DataFrame(index=models, columns=list(baselines), dtype=float)
    for model in models:
        for base in baselines:
            if model == base or base not in table:
                continue
            pair = table[[model, base]].dropna()
            if len(pair):
                a, b = pair[model].to_numpy(), pair[base].to_numpy()
                out.loc[model, base] = ((a < b).sum() + 0.5 * (a == b).sum()) / len(pair)
    return out


def _runs(paths: Sequence[str | os.PathLike[str]]) -> dict[str, dict[str, Any]]:
    """``run.json`` payloads found next to the results files, by model name."""
    runs: dict[str, dict[str, Any]] = {}
    for p in map(Path, paths):
        files = [p.parent / RUN_FILE] if p.is_file() else sorted(p.rglob(RUN_FILE)) if p.is_dir() else []
        for f in files:
            if f.is_file():
                payload = json.loads(f.read_text())
                runs[str(payload.get("model", f.parent.name))] = payload
    return runs


def _fmt(value: float, digits: int = 3) -> str:
    return "—" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table: the first column left-aligned, the others right-aligned."""
    rule = "|" + "|".join(["---", *["--:"] * (len(header) - 1)]) + "|"
    return ["| " + " | ".join(header) + " |", rule, *("| " + " | ".join(row) + " |" for row in rows)]


def markdown_report(
    results: pd.DataFrame,
    runs: dict[str, dict[str, Any]],
    *,
    title: str = "Benchmark report",
    images: Sequence[str] = (),
    command: str | None = None,
    notes: Sequence[str] = (),
    reference: str | None = None,
) -> str:
    """The Markdown text of a report (see the module docstring); ``notes`` are paragraphs added after the intro;
    ``reference`` adds every other model's paired ratio to that model, with bootstrap intervals."""
    models = model_order(results["model"])
    base = results[results["model"] == NORMALISER]
    norm = normalise(results, base)
    summary = summarise(norm)
    keys = list(dict.fromkeys(base["dataset"]))
    raw = results.set_index(["dataset", "model"])
    info = results.drop_duplicates("dataset", keep="last").set_index("dataset")

    out = [f"# {title}", ""]
    out += [
        "GIFT-Eval protocol (gluonts `evaluate_model`, `axis=None`, `mask_invalid_label=True`, "
        "`allow_nan_forecast=False`, seasonality `get_seasonality(freq)`), multivariate data per variate. "
        "MASE is `MASE[0.5]` (median forecast); CRPS is `mean_weighted_sum_quantile_loss` over the levels "
        "0.1-0.9. Normalised values are divided by Seasonal Naive (statsforecast, 9 quantile levels) on the same "
        "configuration; aggregates are geometric means over configurations. Lower is better.",
        "",
    ]
    for note in notes:
        out += [note, ""]
    out += [f"![{Path(i).stem}]({i})" for i in images] + ([""] if images else [])

    out += ["## MASE / CRPS per configuration", ""]
    rows = []
    for key in keys:
        cells = [f"`{key}`", str(info.loc[key, "domain"]), str(info.loc[key, "num_variates"])]
        for m in models:
            if (key, m) in raw.index:
                r = raw.loc[(key, m)]
                r = r.iloc[-1] if isinstance(r, pd.DataFrame) else r
                cells.append(f"{_fmt(r[MASE])} / {_fmt(r[CRPS], 4)}")
            else:
                cells.append("—")
        rows.append(cells)
    out += [*markdown_table(["configuration", "domain", "variates", *models], rows), ""]

    out += ["## Normalised by Seasonal Naive (MASE / CRPS)", ""]
    ratios = norm.set_index(["dataset", "model"])
    others = [m for m in models if m != NORMALISER]
    rows = []
    for key in keys:
        cells = [f"`{key}`"]
        for m in others:
            if (key, m) in ratios.index:
                r = ratios.loc[(key, m)]
                cells.append(f"{_fmt(r['MASE'])} / {_fmt(r['CRPS'])}")
            else:
                cells.append("—")
        rows.append(cells)
    rows.append(
        ["**geometric mean**"]
        + [
            f"**{_fmt(summary[m]['overall']['MASE'])} / {_fmt(summary[m]['overall']['CRPS'])}**"
            if m in summary
            else "—"
            for m in others
        ]
    )
    out += [*markdown_table(["configuration", *others], rows), ""]

    out += ["## Normalised geometric means", ""]
    terms = [t for t in ("short", "medium", "long") if any(t in s for s in summary.values())]
    header = ["model", "configs", "MASE", "CRPS", *(f"{t} MASE / CRPS" for t in terms)]
    rows = []
    for m in models:
        if m not in summary:
            continue
        s = summary[m]
        n = str(s["overall"]["n"]) + (f" ({s['overall']['excluded']} excluded)" if "excluded" in s["overall"] else "")
        rows.append(
            [m, n, _fmt(s["overall"]["MASE"]), _fmt(s["overall"]["CRPS"])]
            + [f"{_fmt(s[t]['MASE'])} / {_fmt(s[t]['CRPS'])} ({s[t]['n']})" if t in s else "—" for t in terms]
        )
    out += [*markdown_table(header, rows), ""]
    out += _frequency_section(norm, models)

    baselines = [b for b in BASELINE_ORDER if b in models]
    out += ["## Win rates against each baseline (MASE / CRPS)", ""]
    out += ["Share of configurations where the row's model scores lower than the column's baseline; ties count half.",
            ""]
    wins_mase, wins_crps = win_rates(results, MASE, baselines), win_rates(results, CRPS, baselines)
    rows = [
        [m] + [
            "—" if np.isnan(wins_mase.loc[m, b]) else f"{wins_mase.loc[m, b]:.0%} / {wins_crps.loc[m, b]:.0%}"
            for b in baselines
        ]
        for m in models
    ]
    out += [*markdown_table(["model", *(f"vs {b}" for b in baselines)], rows), ""]

    if reference is not None:
        out += _paired_section(norm, models, reference)
    out += _anchors_section(results)
    out += _runs_section(runs, models, command)
    return "\n".join(out).rstrip() + "\n"


def _frequency_section(norm: pd.DataFrame, models: Sequence[str]) -> list[str]:
    """Normalised geometric means per frequency, the finest first, with the configurations behind each."""
    by_freq = summarise_by_frequency(norm)
    freqs = sorted({f for means in by_freq.values() for f in means}, key=step_duration)
    rows = [
        [m] + [f"{_fmt(s[f]['MASE'])} / {_fmt(s[f]['CRPS'])} ({s[f]['n']})" if f in s else "—" for f in freqs]
        for m in models if (s := by_freq.get(m)) is not None
    ]
    return ["## Normalised geometric means per frequency (MASE / CRPS)", "",
            "Configurations behind each mean in brackets: where they are few, so are the series and windows that "
            "decide it.", "", *markdown_table(["model", *freqs], rows), ""]


def _require_reference(models: pd.Series, reference: str) -> None:
    if reference not in set(models):
        raise EvaluationError(f"reference model {reference!r} has no results; models: {', '.join(model_order(models))}")


def _paired_section(norm: pd.DataFrame, models: Sequence[str], reference: str) -> list[str]:
    """Each model's geometric mean divided by the reference's over the configurations both scored, with a 95% BCa
    bootstrap interval over configurations (:func:`tsfm.pipelines.evaluate.paired_ratio_interval`)."""
    _require_reference(norm["model"], reference)
    table = norm.pivot_table(index="dataset", columns="model", values=["MASE", "CRPS"], aggfunc="last")
    rows = []
    for model in models:
        if model == reference or model not in set(norm["model"]):
            continue
        cells = []
        for metric in ("MASE", "CRPS"):
            pair = table[metric][[model, reference]]
            pair = pair[np.isfinite(pair).all(axis=1) & (pair > 0).all(axis=1)]
            if len(pair) < 2:
                cells.append("—")
                continue
            ratio, low, high = paired_ratio_interval(pair[model], pair[reference])
            cells.append(f"{ratio:.3f} [{low:.3f}, {high:.3f}] ({len(pair)})")
        rows.append([model, *cells])
    return [
        f"## Paired against `{reference}`", "",
        f"Each model's geometric mean over the configurations both scored, divided by `{reference}`'s, with a 95% "
        "BCa bootstrap interval over configurations (10,000 resamples, seed 0). An interval that contains 1 means "
        "this benchmark cannot tell the two apart.", "",
        *markdown_table(["model", "MASE ratio [95%] (configs)", "CRPS ratio [95%] (configs)"], rows), "",
    ]


PUBLISHED: dict[str, dict[str, tuple[float, float]]] = {
    "m4_hourly/H/short": {"seasonal_naive": (1.193, 0.038), "auto_arima": (1.030, 0.034)},
    "ett1/H/short": {"seasonal_naive": (0.977, 0.240), "auto_arima": (0.995, 0.223)},
    "ett2/H/short": {"seasonal_naive": (0.923, 0.089), "auto_arima": (0.952, 0.089)},
}
"""GIFT-Eval leaderboard values (MASE, CRPS) for configurations our benchmark shares by name (DESIGN §6)."""

SAME_DATA = frozenset({"m4_hourly/H/short"})
"""Of those, the configurations built from the same data as GIFT-Eval's; our ETT files are another version of the
dataset (Seasonal Naive differs by about 5 %), so their rows measure that difference, not the models."""


def _anchors_section(results: pd.DataFrame) -> list[str]:
    """Our values next to GIFT-Eval's published ones where the configuration has the same name, saying which share
    the data."""
    rows = []
    for key, published in PUBLISHED.items():
        data = "same" if key in SAME_DATA else "another version"
        for model, (mase, crps) in published.items():
            ours = results[(results["dataset"] == key) & (results["model"] == model)]
            if len(ours):
                r = ours.iloc[-1]
                rows.append([f"`{key}`", data, model, f"{_fmt(r[MASE])} / {_fmt(r[CRPS])}",
                             f"{mase:.3f} / {crps:.3f}"])
    if not rows:
        return []
    return [
        "## Against GIFT-Eval's published values (MASE / CRPS)",
        "",
        "Only `m4_hourly` is built from the same data as GIFT-Eval's configuration; our ETT files are another "
        "version of the dataset, so the ETT rows show how much that version moves the baselines, not a comparison "
        "of models.",
        "",
        *markdown_table(["configuration", "data", "model", "ours", "GIFT-Eval"], rows),
        "",
    ]


def _runs_section(runs: dict[str, dict[str, Any]], models: Sequence[str], command: str | None) -> list[str]:
    """Wall times, settings, machine, versions and the commands, from the ``run.json`` files."""
    if not runs:
        return []
    out = ["## Runs", ""]
    any_run = next(iter(runs.values()))
    build = any_run.get("benchmark_build_seconds")
    commands: list[str] = []
    if build is not None:
        out += [f"Benchmark `{any_run.get('benchmark')}`: built in {build:.1f} s (`benchmark.json`).", ""]
        commands.append(f"tsfm data build-benchmark --out {any_run.get('benchmark')}")
    rows = []
    for m in models:
        if m not in runs:
            continue
        r = runs[m]
        settings = ", ".join(f"{k}: {v}" for k, v in r.get("settings", {}).items() if k in _SETTING_KEYS)
        rows.append([m, str(r.get("configurations", "")), f"{r.get('wall_seconds', float('nan')):.1f}", settings])
    baseline_seconds = [runs[m]["wall_seconds"] for m in BASELINE_ORDER if m in runs and "wall_seconds" in runs[m]]
    if len(baseline_seconds) > 1:
        rows.append(["**baselines together**", "", f"**{sum(baseline_seconds):.1f}**", ""])
    out += [*markdown_table(["model", "configs", "wall time (s)", "settings"], rows), ""]
    machine = any_run.get("machine", {})
    if machine:
        out += [
            "Machine: " + ", ".join(f"{k} {v}" for k, v in machine.items()) + ". A model's wall time is the sum over "
            "configurations of forecasting and scoring (data loading and the Seasonal-Naive normaliser excluded).",
            "",
        ]
    versions = any_run.get("versions", {})
    if versions:
        out += ["Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()) + ".", ""]
    commands += [c for r in runs.values() for c in r.get("commands", [r.get("command")]) if c]
    if command:
        commands.append(command)
    if commands:
        out += ["Commands:", "", "```", *dict.fromkeys(commands), "```", ""]
    return out


_SETTING_KEYS = (
    "history", "approximation", "orders", "season", "checkpoint", "parameters", "backbone", "d_model", "n_layers",
    "context_length", "weights_sha256", "training_command",
)


# ------------------------------------------------------------------------------------------------ plots


def agg_figure(width: float, height: float) -> Any:
    """An Agg-backed figure (no pyplot state touched, so reports can be drawn from threads and tests)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def plot_normalised(norm: pd.DataFrame, path: Path) -> Path:
    """Grouped bars of normalised MASE (top) and CRPS (bottom) per configuration and model: each bar runs from
    Seasonal Naive's 1 to the model's ratio on a log scale, so better-than-SN points down."""
    from matplotlib.ticker import FuncFormatter

    models = [m for m in model_order(norm["model"]) if m != NORMALISER]
    keys = list(dict.fromkeys(norm["dataset"]))
    fig = agg_figure(max(10.0, 0.42 * len(keys) + 2), 8)
    axes = fig.subplots(2, 1, sharex=True)
    width = 0.8 / max(len(models), 1)
    x = np.arange(len(keys))
    for ax, metric in zip(axes, ("MASE", "CRPS"), strict=True):
        table = norm.pivot_table(index="dataset", columns="model", values=metric, aggfunc="last").reindex(keys)
        for i, m in enumerate(models):
            if m in table:
                ratio = table[m].to_numpy()
                ax.bar(x + (i - (len(models) - 1) / 2) * width, ratio - 1.0, width, bottom=1.0, label=m)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:g}")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
        ax.tick_params(axis="y", which="minor", labelsize=7)
        ax.set_ylabel(f"{metric} / Seasonal Naive")
        ax.grid(axis="y", alpha=0.3, which="both")
    axes[0].legend(ncol=len(models), fontsize=8, loc="upper left")
    axes[1].set_xticks(x, keys, rotation=70, ha="right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    return path


def _example_configs(benchmark: Path, keys: Sequence[str]) -> list[tuple[str, str]]:
    """Up to :data:`EXAMPLE_CONFIGS` configurations of the results, one per frequency, short term first."""
    available = config_keys(benchmark, select_configs(benchmark))
    wanted = set(keys)
    chosen: list[tuple[str, str]] = []
    seen: set[str] = set()
    for config, key in sorted(available.items(), key=lambda item: item[0][1] != "short"):  # stable: short first
        freq = key.split("/")[1]
        if key in wanted and freq not in seen:
            chosen.append(config)
            seen.add(freq)
        if len(chosen) == EXAMPLE_CONFIGS:
            break
    return chosen


def plot_examples(
    benchmark: Path, configs: Sequence[tuple[str, str]], models: Sequence[str], path: Path, device: str | None = None
) -> Path:
    """One row per configuration, one column per model: the last test window of the first series, its history,
    the median and the 10-90 / 20-80 / 30-70 % bands."""
    runners = [eval_model(m, device=device) for m in models]
    fig = agg_figure(4.2 * len(runners), 2.6 * len(configs))
    axes = np.atleast_2d(fig.subplots(len(configs), len(runners), squeeze=False))
    for row, (name, term) in enumerate(configs):
        ds = GiftEvalDataset.per_variate(name, term, root=benchmark)
        first = next(iter(ds.test_data))  # (input, label) of the first series' first window
        context, label = first[0], first[1]
        h = ds.prediction_length
        history = np.asarray(context["target"], dtype=float)[-EXAMPLE_HISTORY * h :]
        t_hist = np.arange(-len(history), 0)
        t_future = np.arange(h)
        for col, runner in enumerate(runners):
            ax = axes[row, col]
            forecast = next(iter(runner.make_predictor(ds).predict([context])))
            ax.plot(t_hist, history, color="black", linewidth=0.8)
            ax.plot(t_future, np.asarray(label["target"], dtype=float)[:h], color="black", linewidth=0.8, alpha=0.5)
            for alpha, (lo, hi) in zip((0.15, 0.25, 0.35), BANDS, strict=True):
                ax.fill_between(t_future, forecast.quantile(lo), forecast.quantile(hi), color="C0", alpha=alpha,
                                linewidth=0)
            ax.plot(t_future, forecast.quantile("0.5"), color="C0", linewidth=1.0)
            ax.set_title(f"{runner.name}: {ds.config_key}", fontsize=9)
            ax.tick_params(labelsize=7)
    fig.tight_layout()
    fig.savefig(path)
    return path


def _default_example_models(results: pd.DataFrame, runs: dict[str, dict[str, Any]]) -> list[str]:
    """The best statistical baseline by CRPS (other than Seasonal Naive) and the tsfm models (by checkpoint)."""
    base = results[results["model"] == NORMALISER]
    summary = summarise(normalise(results, base))
    baselines = [m for m in BASELINE_ORDER if m in summary and m != NORMALISER]
    chosen = [min(baselines, key=lambda m: summary[m]["overall"]["CRPS"])] if baselines else [NORMALISER]
    for _name, run in runs.items():
        if run.get("kind") == "tsfm" and run.get("settings", {}).get("checkpoint"):
            chosen.append(str(run["settings"]["checkpoint"]))
    return chosen


# ------------------------------------------------------------------------------------------------ entry point


def write_report(
    results: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    name: str = "report",
    benchmark: str | os.PathLike[str] | None = None,
    example_models: Sequence[str] | None = None,
    device: str | None = None,
    title: str | None = None,
    command: str | None = None,
    notes: Sequence[str] = (),
    reference: str | None = None,
) -> list[Path]:
    """Write ``OUT/NAME.md``, ``OUT/NAME_normalised.csv``, ``OUT/NAME_normalised.png`` and, with a benchmark,
    ``OUT/NAME_examples.png``; returns the paths written.

    Raises:
        FileNotFoundError: a results path holds no ``all_results.csv``.
        EvaluationError: the results hold no Seasonal Naive rows (the normaliser), or a file is not GIFT-Eval's.
    """
    if not results:
        raise EvaluationError("no results given")
    frame = pd.concat([read_results(p) for p in results], ignore_index=True)
    frame = frame.drop_duplicates(["dataset", "model"], keep="last").reset_index(drop=True)
    if NORMALISER not in set(frame["model"]):
        raise EvaluationError(
            f"the results hold no {NORMALISER} rows; evaluate it too (`tsfm evaluate --model {NORMALISER} ...`): "
            "it is the normaliser"
        )
    if reference is not None:
        _require_reference(frame["model"], reference)  # before anything is written
    runs = _runs(results)
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    norm = normalise(frame, frame[frame["model"] == NORMALISER])
    csv_path = target / f"{name}_normalised.csv"
    norm.to_csv(csv_path, index=False)
    written.append(csv_path)
    images = [plot_normalised(norm, target / f"{name}_normalised.png")]
    if benchmark is not None:
        models = list(example_models) if example_models else _default_example_models(frame, runs)
        configs = _example_configs(Path(benchmark), list(frame["dataset"]))
        if configs:
            images.append(plot_examples(Path(benchmark), configs, models, target / f"{name}_examples.png", device))
    written += images

    text = markdown_report(
        frame, runs, title=title or f"{name} report", images=[p.name for p in images], command=command, notes=notes,
        reference=reference,
    )
    md_path = target / f"{name}.md"
    md_path.write_text(text)
    written.insert(0, md_path)
    return written

