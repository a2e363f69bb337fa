"""The state-tracking report: tables (task x backbone x length, mean and spread over seeds), plots of accuracy
against length, and a comparison with the seed study's figures (DESIGN §6), from a results CSV of the runner.

Everything in the report is computed from the CSV; what the numbers mean (agreement with the seed study and its
reasons) can be added as ``notes``, paragraphs printed under the automatic comparison. matplotlib is imported
only when plotting.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tsfm.pipelines.state_tracking.runner import StateTrackingError, read_results
from tsfm.pipelines.state_tracking.tasks import TASKS


@dataclass(frozen=True)
class SeedStudyClaim:
    """One figure of the seed study (DESIGN §6), on chance-normalised accuracy.

    ``kind``: ``"at_least"`` (ours must reach ``value - tolerance``), ``"at_most"`` (ours must not exceed
    ``value + tolerance``) or ``"about"`` (within ``tolerance``), at every length of ``lengths`` (``None``: at
    every evaluated length; ``"beyond"``: at every length longer than the training length).
    """

    text: str
    task: str
    backbone: str
    kind: str
    value: float
    tolerance: float
    lengths: tuple[int, ...] | str | None = None


SEED_STUDY: tuple[SeedStudyClaim, ...] = (
    SeedStudyClaim("xLSTM [1:1] keeps parity at 1.000 up to length 2,048", "parity", "xlstm[1:1]", "at_least", 1.0,
                   0.01),
    SeedStudyClaim("xLSTM [1:1] keeps S3 at 1.000 up to length 2,048", "s3", "xlstm[1:1]", "at_least", 1.0, 0.01),
    SeedStudyClaim("Mamba-2 stays at or below 0.352 on parity beyond the training length", "parity", "mamba2",
                   "at_most", 0.352, 0.05, "beyond"),
    SeedStudyClaim("GDN [-1,1] drops to 0.47 on parity at length 2,048", "parity", "gdn[neg_eigval]", "about", 0.47,
                   0.1, (2048,)),
)
"""The seed study's synthetic-task figures that this suite can check, with the tolerance of the verdict."""


def _read(paths: Sequence[Path]) -> pd.DataFrame:
    """Every row of one or more results CSVs (or folders holding ``results.csv``), typed."""
    frames = []
    for path in paths:
        path = path / "results.csv" if path.is_dir() else path
        if not path.is_file():
            raise StateTrackingError(f"{path}: no such results file")
        rows = read_results(path)
        if rows:
            frames.append(pd.DataFrame(rows))
    if not frames:
        raise StateTrackingError(f"no result rows in {', '.join(map(str, paths))}")
    data = pd.concat(frames, ignore_index=True)
    for column in ("seed", "train_length", "eval_length", "steps"):
        data[column] = data[column].astype(int)
    for column in ("accuracy", "normalised_accuracy", "final_accuracy", "chance", "seconds"):
        data[column] = data[column].astype(float)
    return data


def recipes(paths: Sequence[Path]) -> list[int]:
    """The training lengths in steps (one recipe each) found in the results files, shortest first."""
    return sorted(int(s) for s in _read(paths)["steps"].unique())


def load_results(paths: Sequence[Path], steps: int | None = None) -> pd.DataFrame:
    """Rows of one or more results CSVs (or folders holding ``results.csv``) for one recipe: ``steps`` (default:
    the largest in the files) and its training length."""
    data = _read(paths)
    available = sorted(int(s) for s in data["steps"].unique())
    chosen = int(available[-1]) if steps is None else steps
    data = data[data["steps"] == chosen]
    if data.empty:
        raise StateTrackingError(f"no rows with steps={chosen}; the files hold steps {available}")
    if data["train_length"].nunique() > 1:
        lengths = sorted(int(n) for n in data["train_length"].unique())
        raise StateTrackingError(f"rows with steps={chosen} mix training lengths {lengths}")
    return data.drop_duplicates(["task", "backbone", "seed", "eval_length"], keep="last")


def summarise(data: pd.DataFrame, column: str = "normalised_accuracy") -> pd.DataFrame:
    """Mean, sample standard deviation and number of seeds of ``column`` per (task, backbone, eval_length), tasks
    and backbones in the order they first appear."""
    grouped = data.groupby(["task", "backbone", "eval_length"], sort=False)[column]
    table = grouped.agg(mean="mean", std="std", seeds="count").reset_index()
    table["std"] = table["std"].fillna(0.0)
    return table


def _order(values: pd.Series, preferred: Sequence[str] = ()) -> list[str]:
    seen = list(dict.fromkeys(values))
    return [v for v in preferred if v in seen] + [v for v in seen if v not in preferred]


def markdown_table(summary: pd.DataFrame) -> str:
    """Rows task x backbone, one column per evaluation length, cells ``mean ± std`` over seeds."""
    lengths = sorted(summary["eval_length"].unique())
    header = "| task | backbone | seeds | " + " | ".join(f"L = {length:,}" for length in lengths) + " |"
    lines = [header, "|" + "---|" * (3 + len(lengths))]
    for task in _order(summary["task"], list(TASKS)):
        part = summary[summary["task"] == task]
        for backbone in _order(part["backbone"]):
            cells = part[part["backbone"] == backbone].set_index("eval_length")
            values = [f"{cells.at[length, 'mean']:.3f} ± {cells.at[length, 'std']:.3f}" if length in cells.index
                      else "–" for length in lengths]
            lines.append(f"| {task} | `{backbone}` | {int(cells['seeds'].min())} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def compare_with_seed_study(data: pd.DataFrame, claims: Sequence[SeedStudyClaim] = SEED_STUDY) -> str:
    """A table: each seed-study figure, ours (mean ± std of chance-normalised accuracy, worst length), verdict."""
    summary = summarise(data)
    train_length = int(data["train_length"].iloc[0])
    lines = ["| seed study | lengths | ours (normalised, mean ± std) | verdict |", "|---|---|---|---|"]
    for claim in claims:
        rows = summary[(summary["task"] == claim.task) & (summary["backbone"] == claim.backbone)]
        if claim.lengths == "beyond":
            rows = rows[rows["eval_length"] > train_length]
        elif claim.lengths is not None:
            rows = rows[rows["eval_length"].isin(claim.lengths)]
        if rows.empty:
            lines.append(f"| {claim.text} | – | not run | – |")
            continue
        ours = ", ".join(f"{r.eval_length:,}: {r.mean:.3f} ± {r.std:.3f}" for r in rows.itertuples())
        if claim.kind == "at_least":
            agree = bool((rows["mean"] >= claim.value - claim.tolerance).all())
        elif claim.kind == "at_most":
            agree = bool((rows["mean"] <= claim.value + claim.tolerance).all())
        elif claim.kind == "about":
            agree = bool(((rows["mean"] - claim.value).abs() <= claim.tolerance).all())
        else:
            raise ValueError(f"unknown claim kind {claim.kind!r}")
        rule = {"at_least": ">=", "at_most": "<=", "about": "within ±"}[claim.kind]
        bound = claim.tolerance if claim.kind == "about" else (
            claim.value - claim.tolerance if claim.kind == "at_least" else claim.value + claim.tolerance)
        verdict = f"{'agrees' if agree else 'differs'} (rule: {rule} {bound:.3g}"
        verdict += f" of {claim.value:.3g})" if claim.kind == "about" else ")"
        lengths = ", ".join(f"{length:,}" for length in rows["eval_length"])
        lines.append(f"| {claim.text} | {lengths} | {ours} | {verdict} |")
    return "\n".join(lines)


def plot_accuracy(data: pd.DataFrame, out_dir: Path) -> list[Path]:
    """One PNG per task of one recipe (``<task>_<steps>.png``): chance-normalised accuracy against evaluation
    length (log scale), a line per backbone with the spread over seeds as error bars; the training length is
    marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    summary, written = summarise(data), []
    train_length, steps = int(data["train_length"].iloc[0]), int(data["steps"].iloc[0])
    for task in _order(summary["task"], list(TASKS)):
        part = summary[summary["task"] == task]
        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        for backbone in _order(part["backbone"]):
            rows = part[part["backbone"] == backbone].sort_values("eval_length")
            ax.errorbar(rows["eval_length"], rows["mean"], yerr=rows["std"], marker="o", capsize=3, label=backbone)
        ax.axvline(train_length, color="grey", linestyle=":", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_ylim(-0.1, 1.05)
        ax.set_xlabel("evaluation length (tokens)")
        ax.set_ylabel("normalised accuracy")
        ax.set_title(f"{task} (trained at length <= {train_length}, {steps:,} steps)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
        fig.tight_layout()
        path = out_dir / f"{task}_{steps}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def _calls(paths: Sequence[Path]) -> list[str]:
    """The recorded commands (``runs.jsonl`` beside each results file)."""
    commands = []
    for path in paths:
        folder = path if path.is_dir() else path.parent
        log = folder / "runs.jsonl"
        if log.is_file():
            commands += [json.loads(line)["command"] for line in log.read_text().splitlines() if line.strip()]
    return list(dict.fromkeys(commands))


def _recipe_section(data: pd.DataFrame, plot_dir: Path) -> tuple[list[str], list[Path]]:
    """The tables, plots and seed-study comparison of one recipe (one number of training steps)."""
    plots = plot_accuracy(data, plot_dir)
    steps, train_length = int(data["steps"].iloc[0]), int(data["train_length"].iloc[0])
    device = ", ".join(sorted(data["device"].unique())) if "device" in data else "?"
    hours = data.drop_duplicates(["task", "backbone", "seed"])["seconds"].sum() / 3600
    lines = [f"## {steps:,} training steps", "",
             f"Trained on sequences of length <= {train_length} for {steps:,} steps. Rows: {len(data)} from "
             f"{data.groupby(['task', 'backbone', 'seed']).ngroups} models; device: {device}; {hours:.2f} "
             "model-hours of training and evaluation.", "",
             "### Comparison with the seed study (DESIGN §6)", "", compare_with_seed_study(data), "",
             "### Normalised accuracy (mean ± std over seeds)", "", markdown_table(summarise(data)), "",
             "### Raw accuracy (mean ± std over seeds)", "", markdown_table(summarise(data, "accuracy")), "",
             "### Accuracy of the last position (mean ± std over seeds)", "",
             "For a^n b^n and a^n b^n c^n this is the membership question (the label at END).", "",
             markdown_table(summarise(data, "final_accuracy")), "", "### Plots", ""]
    lines += [f"![{p.stem}]({plot_dir.name}/{p.name})" for p in plots] + [""]
    return lines, plots


def write_report(results: Sequence[Path], out: Path, *, steps: int | None = None, notes: Sequence[str] = (),
                 command: str | None = None) -> list[Path]:
    """Write the markdown report ``out`` and its plots in ``out``'s stem folder (``reports/state_tracking.md`` ->
    ``reports/state_tracking/<task>_<steps>.png``): one section per recipe in the files (every number of training
    steps, shortest first), or only ``steps``; returns the files written."""
    chosen = recipes(results) if steps is None else [steps]
    plot_dir = out.with_suffix("")
    lines = [
        "# State tracking and accumulation",
        "",
        "Synthetic length-generalisation suite (`tsfm.pipelines.state_tracking`): a token embedding, a registered "
        "backbone and a per-position classifier, trained on short sequences and scored at every position of "
        "sequences of each evaluation length. Normalised accuracy is `(acc - chance) / (1 - chance)`: 1 is "
        "perfect, 0 is chance (1/classes for parity, Z5 and S3; the best constant guess for majority, a^n b^n "
        "and a^n b^n c^n). The seed study's figures are chance-normalised accuracies of models trained at length "
        "128; each verdict applies the stated rule to our mean over seeds at each listed length.",
        "",
    ]
    for note in notes:
        lines += [note, ""]
    written: list[Path] = []
    for recipe in chosen:
        section, plots = _recipe_section(load_results(results, recipe), plot_dir)
        lines += section
        written += plots
    calls = _calls(results)
    if calls or command:
        lines += ["## Commands", "", "```", *calls, *([command] if command else []), "```", ""]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    return [out, *written]
