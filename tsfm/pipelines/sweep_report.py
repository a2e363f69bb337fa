"""The scaling-sweep report: ``tsfm report --sweep reports/sweep/results.csv`` (issue 12, item 4).

``write_sweep_report("reports/sweep/results.csv", "reports", name="sweep")`` reads the rows that
:mod:`tsfm.pipelines.sweep` appends (one per run, benchmark configuration and decoding) and writes ``OUT/NAME.md``:

- per decoding, the normalised geometric-mean MASE and CRPS per backbone x preset (mean over seeds, with the
  min-max range over seeds when there are several);
- the budget rule beside the tokens each backbone saw (per parameter) and its training and validation loss;
- per-frequency and per-term breakdowns at the largest preset that compares mixer families;
- training and validation loss curves and tokens/s per run (when ``runs/`` lies beside the CSV);
- the seed study's claim (DESIGN §6) set beside the numbers, point by point, and the likely reasons written by hand
  in ``READING.md`` beside the CSV;
- the command line and sources;

and PNGs ``NAME_scaling_<decoding>.png`` (log-log score against parameters) and ``NAME_losses.png``.

Aggregation is the leaderboard's: a run's score is the geometric mean over configurations of its ratios to Seasonal
Naive (:func:`tsfm.pipelines.evaluate.aggregate.geometric_mean`). matplotlib is used through ``Figure`` and the Agg
canvas, never pyplot, so callers' figures and backends are left alone.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..backbones.registry import parse_backbone_spec
from .data.frequency import step_duration
from .evaluate.aggregate import geometric_mean, key_part
from .report import agg_figure, markdown_table
from .sweep import BUDGET_RULE, RECIPES, SHORT_CONTEXTS, recipes_record, recorded_recipes

__all__ = [
    "CLAIM_BACKBONE",
    "CONV_CLAIM_BACKBONE",
    "REQUIRED_COLUMNS",
    "SweepReportError",
    "breakdown",
    "cell_stats",
    "claim_points",
    "mix_points",
    "read_sweep",
    "run_scores",
    "seed_ranges_overlap",
    "write_sweep_report",
]

REQUIRED_COLUMNS: tuple[str, ...] = (
    "run", "backbone", "preset", "seed", "parameters", "dataset", "MASE_normalised", "CRPS_normalised",
)
"""What the report cannot do without; every other column (losses, tokens/s, device, decoding) is optional."""

METRICS: tuple[str, ...] = ("MASE", "CRPS")
DEFAULT_DECODING = "masked"  # sweeps written before the decoding column scored with masked decoding only
READ_ALONE = ", short contexts read alone"
"""Appended to the decoding of rows scored before ``Forecaster.read_context`` (no ``short_contexts`` column, or
another value than :data:`tsfm.pipelines.sweep.SHORT_CONTEXTS`): their scores are another measurement, so every
table, plot and verdict keeps them apart, as it keeps decodings apart."""
CLAIM_BACKBONE = "xlstm[3:1]"
CONV_CLAIM_BACKBONE = "xlstm[3:1,conv]"
"""The same mix with the short causal convolution in its mLSTM blocks, as the xLSTM paper builds them: the claim is
judged on it too, in its own table, where the sweep ran it (the plain form's verdicts stay as measured)."""
CLAIM_LEAD_PRESETS: tuple[str, ...] = ("1M", "3M", "10M", "40M")
CLAIM_NARROW_PRESET = "80M"
CLAIM_TEXT = (
    "The seed study reports that xLSTM `[3:1]` leads Mamba-2 and Gated DeltaNet on both MASE and CRPS from 1M to "
    "40M parameters, with the gap narrowing at 80M (DESIGN §6)."
)
MIX_TEXT = (
    "xLSTM's edge is said to come from combining accumulation (mLSTM blocks) with state tracking (sLSTM blocks) "
    "(the project's brief): then a mix `xlstm[a:b]` with both kinds of block should beat `xlstm[1:0]` (mLSTM only) and "
    "`xlstm[0:1]` (sLSTM only) at the ablation preset. Mixes with the convolution in their mLSTM blocks "
    "(`xlstm[a:b,conv]`) are judged against `xlstm[1:0,conv]` and `xlstm[0:1]`."
)
DPI = 72  # small PNGs: they are committed


class SweepReportError(ValueError):
    """A results CSV the report cannot use (missing file or columns, no scored rows)."""


# ---------------------------------------------------------------------------------------------------------- reading


def read_sweep(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The sweep's rows, checked, with a ``decoding`` column (``"masked"`` where the CSV predates it; rows scored
    before short contexts were read after the missing patches carry :data:`READ_ALONE` after it).

    Rows whose normalised scores are missing (a configuration without a Seasonal-Naive value) are dropped, because a
    geometric mean over NaN is meaningless and the leaderboard leaves such configurations out too.

    Raises:
        SweepReportError: the file is missing, lacks a required column, or has no scored row.
    """
    path = Path(path)
    if not path.is_file():
        raise SweepReportError(f"--sweep {path}: no such file")
    try:
        frame = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as err:
        raise SweepReportError(f"--sweep {path}: not a readable CSV ({err})") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise SweepReportError(f"{path} lacks the column(s) {', '.join(missing)}: not a sweep results.csv")
    if "decoding" not in frame.columns:
        frame["decoding"] = DEFAULT_DECODING
    frame["decoding"] = frame["decoding"].fillna(DEFAULT_DECODING).astype(str)
    if "short_contexts" not in frame.columns:
        frame["short_contexts"] = None
    before = frame["short_contexts"].fillna("").astype(str) != SHORT_CONTEXTS
    frame.loc[before, "decoding"] = frame.loc[before, "decoding"] + READ_ALONE
    frame["backbone"] = frame["backbone"].astype(str)
    frame["preset"] = frame["preset"].astype(str)
    frame["run"] = frame["run"].astype(str)
    scored = frame.dropna(subset=["MASE_normalised", "CRPS_normalised"]).reset_index(drop=True)
    if scored.empty:
        raise SweepReportError(f"{path} has no row with normalised MASE and CRPS")
    scored.attrs["csv_rows"] = len(frame)  # the Sources section tells read rows from scored ones
    return scored


def preset_order(presets: Iterable[str]) -> list[str]:
    """Presets by size (1M, 3M, ... as in :data:`tsfm.presets.PRESET_TARGETS`), unknown names after, by name."""
    from tsfm.presets import PRESET_TARGETS

    names = list(dict.fromkeys(presets))
    known = [p for p in PRESET_TARGETS if p in names]
    return known + sorted(p for p in names if p not in PRESET_TARGETS)


def decoding_order(decodings: Iterable[str]) -> list[str]:
    """Masked first (the default), then the others by name, rows scored with short contexts read alone after the
    current ones, so reports of different sweeps line up."""
    def key(name: str) -> tuple[bool, bool, str]:
        base = name.removesuffix(READ_ALONE)
        return name != base, base != DEFAULT_DECODING, base

    return sorted(set(decodings), key=key)


def file_label(decoding: str) -> str:
    """``decoding`` as a file-name part: ``"masked, short contexts read alone"`` ->
    ``"masked-short-contexts-read-alone"``."""
    return re.sub(r"[^A-Za-z0-9]+", "-", decoding).strip("-")


# ------------------------------------------------------------------------------------------------------ aggregation


def run_scores(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (decoding, run): geometric means of the normalised MASE and CRPS over its configurations.

    This is the unit the seeds vary over: a seed's score is one leaderboard number, as GIFT-Eval ranks models.
    """
    keys = ["decoding", "run", "backbone", "preset", "seed"]
    rows = []
    for key, group in frame.groupby(keys, sort=False):
        rows.append({
            **dict(zip(keys, key, strict=True)),
            "parameters": float(group["parameters"].iloc[0]),
            "MASE": geometric_mean(group["MASE_normalised"]),
            "CRPS": geometric_mean(group["CRPS_normalised"]),
            "configs": len(group),
        })
    return pd.DataFrame(rows)


def cell_stats(scores: pd.DataFrame) -> pd.DataFrame:
    """Per (decoding, backbone, preset): mean, min and max over seeds of each run score, and the parameter count.

    The spread is min-max (not std): with two or three seeds a standard deviation says little, the range says all.
    """
    grouped = scores.groupby(["decoding", "backbone", "preset"], sort=False)
    out = grouped.agg(
        parameters=("parameters", "mean"), seeds=("seed", "nunique"),
        MASE=("MASE", "mean"), MASE_min=("MASE", "min"), MASE_max=("MASE", "max"),
        CRPS=("CRPS", "mean"), CRPS_min=("CRPS", "min"), CRPS_max=("CRPS", "max"),
    )
    return out.reset_index()


def breakdown(frame: pd.DataFrame, part: str) -> pd.DataFrame:
    """Geometric means of normalised MASE and CRPS per backbone and frequency (``part="freq"``) or term.

    The config key is ``dataset/FREQ/term``; rows of every seed are pooled, which is the geometric mean of the
    per-seed geometric means when every seed scored the same configurations.
    """
    keyed = frame.assign(**{part: key_part(frame["dataset"], part)})
    rows = []
    for (backbone, value), group in keyed.groupby(["backbone", part]):
        rows.append({"backbone": backbone, part: value, "MASE": geometric_mean(group["MASE_normalised"]),
                     "CRPS": geometric_mean(group["CRPS_normalised"]), "n": len(group)})
    return pd.DataFrame(rows)


def leader(cells: pd.DataFrame, metric: str) -> tuple[str, float]:
    """The backbone with the lowest mean ``metric`` among ``cells`` (one decoding and preset), and its score."""
    best = cells.loc[cells[metric].idxmin()]
    return str(best["backbone"]), float(best[metric])


# ---------------------------------------------------------------------------------------------------------- markdown


def format_cell(row: pd.Series, metric: str) -> str:
    """``0.812`` for one seed; ``0.812 (0.801-0.823, 2 seeds)`` for several: mean and min-max range."""
    if int(row["seeds"]) <= 1:
        return f"{row[metric]:.3f}"
    return f"{row[metric]:.3f} ({row[f'{metric}_min']:.3f}-{row[f'{metric}_max']:.3f}, {int(row['seeds'])} seeds)"


def format_parameters(value: float) -> str:
    """Parameters in millions, the unit the presets are named in."""
    return f"{value / 1e6:.2f}M"


def scores_section(stats: pd.DataFrame, decoding: str, presets: Sequence[str]) -> list[str]:
    """Per decoding: backbone x preset tables of MASE and CRPS, with each cell's parameter count."""
    lines = [f"### Decoding: {decoding}", ""]
    cells = stats[stats["decoding"] == decoding]
    backbones = sorted(cells["backbone"].unique())
    for metric in METRICS:
        rows = []
        for backbone in backbones:
            row = [f"`{backbone}`"]
            for preset in presets:
                hit = cells[(cells["backbone"] == backbone) & (cells["preset"] == preset)]
                row.append("-" if hit.empty else
                           f"{format_cell(hit.iloc[0], metric)} [{format_parameters(hit.iloc[0]['parameters'])}]")
            rows.append(row)
        lines += [f"Normalised geometric-mean {metric} (lower is better; [parameters]):", ""]
        lines += [*markdown_table(["backbone", *presets], rows), ""]
    return lines


def breakdown_preset(rows: pd.DataFrame, presets: Sequence[str]) -> str:
    """The largest preset where two or more mixer families were scored (the largest of all where none compares two).

    A breakdown is read across mixers: a preset whose grid is half done (one row of three) would show one line, and
    one where only xLSTM's variants were scored (``xlstm[3:1]`` beside ``xlstm[3:1,conv]``) compares no rival.
    """
    scored = [p for p in presets if p in set(rows["preset"])]
    families = rows["backbone"].map(mixer_family)
    compared = [p for p in scored if families[rows["preset"] == p].nunique() > 1]
    return (compared or scored)[-1]


def breakdown_section(frame: pd.DataFrame, decoding: str, presets: Sequence[str]) -> list[str]:
    """Per-frequency and per-term tables at the breakdown preset of this decoding (``breakdown_preset``)."""
    rows_here = frame[frame["decoding"] == decoding]
    preset = breakdown_preset(rows_here, presets)
    rows_here = rows_here[rows_here["preset"] == preset]
    lines = [f"#### {decoding}, preset {preset}", ""]
    for part, label in (("freq", "frequency"), ("term", "term")):
        table = breakdown(rows_here, part)
        values = sorted(table[part].unique(), key=_term_key if part == "term" else step_duration)
        backbones = sorted(table["backbone"].unique())
        rows = []
        for backbone in backbones:
            row = [f"`{backbone}`"]
            for value in values:
                hit = table[(table["backbone"] == backbone) & (table[part] == value)]
                row.append("-" if hit.empty else f"{hit.iloc[0]['MASE']:.3f} / {hit.iloc[0]['CRPS']:.3f}")
            rows.append(row)
        lines += [f"Per {label}, MASE / CRPS:", ""]
        lines += [*markdown_table(["backbone", *values], rows), ""]
    return lines


def _term_key(term: str) -> tuple[int, str]:
    order = {"short": 0, "medium": 1, "long": 2}
    return order.get(term, 3), term


# ------------------------------------------------------------------------------------------------------------- claim


RIVAL_FAMILIES: tuple[str, ...] = ("mamba2", "gdn")


def mixer_family(backbone: str) -> str:
    """The registered mixer a backbone spec builds, its options dropped: ``xlstm[3:1,conv] -> xlstm``."""
    return parse_backbone_spec(backbone)[0]


def rival_family(backbone: str) -> str | None:
    """The rival of the claim a backbone stands for: ``mamba2`` (Mamba-2), ``gdn`` (Gated DeltaNet, any variant),
    or None for every other backbone."""
    family = mixer_family(backbone)
    return family if family in RIVAL_FAMILIES else None


def is_rival(backbone: str) -> bool:
    """The backbones the claim names: Mamba-2 and Gated DeltaNet (any ``gdn`` variant)."""
    return rival_family(backbone) is not None


def missing_rivals(cells: pd.DataFrame) -> list[str]:
    """The rivals the claim names that have no cell here: the claim has the xLSTM lead both, so until both ran
    only a verdict against it ("differs") is final."""
    present = {rival_family(b) for b in cells["backbone"]}
    return [family for family in RIVAL_FAMILIES if family not in present]


def _claim_sides(cells: pd.DataFrame, backbone: str = CLAIM_BACKBONE) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The cells of the claimed xLSTM (``backbone``) and of its rivals."""
    return cells[cells["backbone"] == backbone], cells[cells["backbone"].map(is_rival)]


def _claim_pair(cells: pd.DataFrame, metric: str, backbone: str) -> tuple[pd.Series, pd.Series] | None:
    """The claimed xLSTM's cell and the best rival's on ``metric``; None if either is missing."""
    ours, rivals = _claim_sides(cells, backbone)
    if ours.empty or rivals.empty:
        return None
    return ours.iloc[0], rivals.loc[rivals[metric].idxmin()]


def _pair_gap(pair: tuple[pd.Series, pd.Series], metric: str) -> float:
    ours, rival = pair
    return float(rival[metric] / ours[metric] - 1)


def claim_gap(cells: pd.DataFrame, metric: str, backbone: str = CLAIM_BACKBONE) -> float | None:
    """How far the best rival trails the claimed xLSTM: ``best rival / xlstm - 1`` (positive: xLSTM leads); None if
    either is missing."""
    pair = _claim_pair(cells, metric, backbone)
    return None if pair is None else _pair_gap(pair, metric)


def seed_ranges_overlap(cells: pd.DataFrame, metric: str, backbone: str = CLAIM_BACKBONE) -> bool:
    """Whether the claimed xLSTM's min-max range over seeds overlaps the best rival's: then the lead is within seed
    noise and the verdict should be read with that caveat (only judged where both have several seeds)."""
    pair = _claim_pair(cells, metric, backbone)
    return pair is not None and _rows_overlap(*pair, metric)


def _rows_overlap(a: pd.Series, b: pd.Series, metric: str) -> bool:
    """Whether two cells, each run with several seeds, have overlapping min-max ranges."""
    if f"{metric}_min" not in a or _single_seed(a, b):
        return False
    return bool(a[f"{metric}_min"] <= b[f"{metric}_max"] and b[f"{metric}_min"] <= a[f"{metric}_max"])


def _single_seed(a: pd.Series, b: pd.Series) -> bool:
    """Whether either of two cells ran one seed only (its own spread unknown)."""
    return "seeds" in a and min(int(a["seeds"]), int(b["seeds"])) < 2


NOISE_VERDICT = "within seed noise"


def typical_seed_spread(cells: pd.DataFrame, metric: str) -> float | None:
    """The median relative spread ``(max - min) / mean`` over every cell run with several seeds (any backbone and
    preset of one decoding): how far apart two runs of one recipe land by seed alone. The yardstick for a gap
    between single-seed cells, whose own spread is unknown; None where no cell has several seeds."""
    if f"{metric}_min" not in cells or "seeds" not in cells:
        return None
    seeded = cells[cells["seeds"] >= 2]
    if seeded.empty:
        return None
    return float(((seeded[f"{metric}_max"] - seeded[f"{metric}_min"]) / seeded[metric]).median())


def _verdict(gap: float, noise: str | None) -> str:
    """``agrees`` for a positive gap (the claimed side scores lower), ``differs`` for a negative one, and
    :data:`NOISE_VERDICT` whenever :func:`_noise_note` found the gap no evidence either way."""
    return NOISE_VERDICT if noise else "agrees" if gap > 0 else "differs"


def _noise_note(gap: float, overlap: bool, spread: float | None, single_seed: bool) -> str | None:
    """Why a gap is no evidence either way, or None when it is: the two sides' seed ranges overlap, or one side ran
    a single seed and the gap is smaller than the typical seed spread."""
    if overlap:
        return "seed ranges overlap"
    if single_seed and spread is not None and abs(gap) < spread:
        return f"under the typical seed spread of {spread:.1%}"
    return None


def claim_points(stats: pd.DataFrame, decoding: str, presets: Sequence[str],
                 backbone: str = CLAIM_BACKBONE) -> list[dict[str, str]]:
    """The claim, point by point, against one decoding's numbers, for ``backbone`` as the claimed xLSTM (the seed
    study's `xlstm[3:1]`, or :data:`CONV_CLAIM_BACKBONE`).

    Returns:
        One dict per point: ``point`` (what the claim says), ``measured`` (what the data says) and ``verdict``
        (``agrees``, ``differs``, :data:`NOISE_VERDICT` or ``not measured``). Nothing here knows the outcome in
        advance.
    """
    cells = stats[stats["decoding"] == decoding]
    spreads = {metric: typical_seed_spread(cells, metric) for metric in METRICS}
    points = []
    for preset in presets:
        here = cells[cells["preset"] == preset]
        for metric in METRICS:
            points.append(_lead_point(here, preset, metric, backbone, spreads[metric]))
    points += [_gap_point(cells, presets, metric, backbone) for metric in METRICS]
    return points


def _lead_point(here: pd.DataFrame, preset: str, metric: str, backbone: str,
                spread: float | None = None) -> dict[str, str]:
    """Whether the claimed xLSTM scores below every rival present at one preset (the claim expects so up to 80M);
    :data:`NOISE_VERDICT` where the gap is no larger than seeds alone move a score (``spread``:
    :func:`typical_seed_spread`)."""
    expected = "leads" if preset in CLAIM_LEAD_PRESETS else "leads, by a narrower gap" \
        if preset == CLAIM_NARROW_PRESET else "(preset outside the study)"
    point = f"{preset}, {metric}: `{backbone}` {expected}"
    if here.empty:
        return {"point": point, "measured": "no run at this preset", "verdict": "not measured"}
    best, score = leader(here, metric)
    pair = _claim_pair(here, metric, backbone)
    measured = f"leader `{best}` ({score:.3f})"
    if pair is None:
        return {"point": point, "measured": measured + f"; `{backbone}` or its rivals not run",
                "verdict": "not measured"}
    gap = _pair_gap(pair, metric)
    measured += f"; best rival {'trails' if gap > 0 else 'leads'} `{backbone}` by {abs(gap):.1%}"
    noise = _noise_note(gap, _rows_overlap(*pair, metric), spread, _single_seed(*pair))
    if noise:
        measured += f" ({noise})"
    if preset not in (*CLAIM_LEAD_PRESETS, CLAIM_NARROW_PRESET):
        return {"point": point, "measured": measured, "verdict": "not measured"}
    verdict = _verdict(gap, noise)
    missing = missing_rivals(here)
    if missing and verdict != "differs":
        return {"point": point, "measured": measured + f"; {_not_run(missing)} at this preset",
                "verdict": "not measured"}
    return {"point": point, "measured": measured, "verdict": verdict}


def _not_run(families: Sequence[str]) -> str:
    return " and ".join(f"`{family}`" for family in families) + " not run"


def _gap_point(cells: pd.DataFrame, presets: Sequence[str], metric: str, backbone: str) -> dict[str, str]:
    """The gap at 80M against the preset before it: the claim has the xLSTM lead from 1M to 40M "with the gap
    narrowing at 80M", so it agrees where the xLSTM still leads at 80M by less than at the last preset before. Every
    preset's gap is listed."""
    point = f"{metric}: the gap narrows at {CLAIM_NARROW_PRESET}"
    gaps = {p: claim_gap(cells[cells["preset"] == p], metric, backbone) for p in presets}
    gaps = {p: g for p, g in gaps.items() if g is not None}
    if len(gaps) < 2:
        return {"point": point, "measured": "fewer than two presets with both sides", "verdict": "not measured"}
    measured = (f"gap {', '.join(f'{g:+.1%} at {p}' for p, g in gaps.items())} "
                f"(best rival / `{backbone}` - 1)")
    large = list(gaps)[-1]
    if large != CLAIM_NARROW_PRESET:
        return {"point": point, "measured": measured + f"; largest preset here is {large}",
                "verdict": "not measured"}
    before = list(gaps)[-2]
    missing = missing_rivals(cells[cells["preset"] == large])
    if missing and gaps[large] > 0:
        # a missing rival could only shrink the lead measured here (the gap is against the best rival present), so
        # the lead's fate is open; no lead at all against the rivals present is final
        return {"point": point, "measured": measured + f"; {_not_run(missing)} at {large}",
                "verdict": "not measured"}
    narrows = 0 < gaps[large] < gaps[before]
    return {"point": point, "measured": measured, "verdict": "agrees" if narrows else "differs"}


def xlstm_ratio(backbone: str) -> tuple[int, int, bool] | None:
    """``(a, b, conv)`` of ``xlstm[a:b]`` or ``xlstm[a:b,conv]`` (mLSTM to sLSTM blocks, and whether the mLSTM
    blocks have the short causal convolution), read by the backbone's own parser; None for any other backbone
    (bare ``xlstm`` included: the report names the ratio)."""
    from tsfm.backbones.registry import parse_backbone_spec
    from tsfm.backbones.xlstm import parse_options

    try:
        name, options = parse_backbone_spec(backbone)
        if name != "xlstm" or options is None:
            return None
        (n_mlstm, n_slstm), flags = parse_options(options)
    except ValueError:
        return None
    return n_mlstm, n_slstm, "conv" in flags


def mix_points(stats: pd.DataFrame, decoding: str) -> list[dict[str, str]]:
    """The mix claim, per preset where both pure forms and a mix ran, per metric: whether the best mix scores below
    both the mLSTM-only and the sLSTM-only model. Judged apart for the plain mLSTM block and for the one with the
    convolution (``,conv``): each family's mixes against its own mLSTM-only model; the sLSTM-only model is shared
    (``,conv`` changes only mLSTM blocks). Same keys as :func:`claim_points`."""
    cells = stats[stats["decoding"] == decoding]
    spreads = {metric: typical_seed_spread(cells, metric) for metric in METRICS}
    cells = cells.assign(form=cells["backbone"].map(xlstm_ratio)).dropna(subset=["form"])
    points = []
    for preset, here in cells.groupby("preset", sort=False):
        slstm_only = here[here["form"].map(lambda f: f[:2] == (0, 1))]
        for conv in (False, True):
            family = here[here["form"].map(lambda f, conv=conv: f[2] == conv)]
            mlstm_only = family[family["form"].map(lambda f: f[:2] == (1, 0))]
            mixes = family[family["form"].map(lambda f: min(f[:2]) > 0)]
            if slstm_only.empty or mlstm_only.empty or mixes.empty:
                continue
            blocks = "mLSTM (with the convolution)" if conv else "mLSTM"
            pures = pd.concat([mlstm_only, slstm_only])
            for metric in METRICS:
                mix, pure = mixes.loc[mixes[metric].idxmin()], pures.loc[pures[metric].idxmin()]
                gap = pure[metric] / mix[metric] - 1  # positive: the mix scores lower
                measured = (f"best mix `{mix['backbone']}` {mix[metric]:.3f}; best pure `{pure['backbone']}` "
                            f"{pure[metric]:.3f} (mix / pure - 1: {mix[metric] / pure[metric] - 1:+.1%})")
                noise = _noise_note(gap, _rows_overlap(mix, pure, metric), spreads[metric], _single_seed(mix, pure))
                if noise:
                    measured += f" ({noise})"
                points.append({"point": f"{preset}, {metric}: a mix of {blocks} and sLSTM beats either alone",
                               "measured": measured, "verdict": _verdict(gap, noise)})
    return points


READING_FILE = "READING.md"
"""Hand-written reasons beside the computed verdicts, kept next to ``results.csv`` so a regenerated report keeps
them; the verdicts are computed, the reasons (data, budget, what the validation split sees) need a person."""


def reading_section(results_csv: Path) -> list[str]:
    """The sweep folder's ``READING.md`` under its own heading, or a line saying none is written yet."""
    path = results_csv.parent / READING_FILE
    lines = ["### Likely reasons", ""]
    if not path.is_file():
        return [*lines, f"(no `{READING_FILE}` beside `{results_csv.name}` yet: the verdicts above stand alone)", ""]
    return [*lines, f"Written by hand in `{path}`, against the numbers of the day it names.", "",
            path.read_text().strip(), ""]


def claim_section(stats: pd.DataFrame, decodings: Sequence[str], presets: Sequence[str]) -> list[str]:
    """"Beside the seed study's claim": the claim, then a verdict table per decoding."""
    lines = ["## Beside the seed study's claim", "", CLAIM_TEXT, "",
             "Rivals are `mamba2` and the `gdn` variants; a lead is the lower mean over seeds, and is judged only "
             "where both rivals ran (a loss to either is judged at once). "
             "Verdicts are computed from the tables above. A gap is no evidence either way, and reads "
             f"**{NOISE_VERDICT}**, where the two sides' seed ranges overlap, or where one side ran a single seed and "
             "the gap is smaller than the typical seed spread: the median of (max - min) / mean over the cells of the "
             "decoding that ran several seeds (any backbone and preset).", ""]
    for decoding in decodings:
        points = claim_points(stats, decoding, presets)
        lines += [f"### Decoding: {decoding}", ""]
        rows = ([p["point"], p["measured"], f"**{p['verdict']}**"] for p in points)
        lines += [*markdown_table(["claim", "measured", "verdict"], rows), ""]
    conv = {decoding: claim_points(stats, decoding, presets, CONV_CLAIM_BACKBONE) for decoding in decodings
            if not any(side.empty for side in _claim_sides(stats[stats["decoding"] == decoding],
                                                        CONV_CLAIM_BACKBONE))}
    if conv:
        lines += [f"### The claim on `{CONV_CLAIM_BACKBONE}`", "",
                  "The same points with the convolution in the mLSTM blocks, as the xLSTM paper builds them (decodings "
                  "where it and a rival both ran).", ""]
        rows = ([p["point"] + f" ({decoding})", p["measured"], f"**{p['verdict']}**"]
                for decoding, points in conv.items() for p in points)
        lines += [*markdown_table(["claim", "measured", "verdict"], rows), ""]
    mixes = {decoding: mix_points(stats, decoding) for decoding in decodings}
    if any(mixes.values()):
        lines += ["### Mixing mLSTM and sLSTM (ablations)", "", MIX_TEXT, ""]
        rows = ([p["point"] + f" ({decoding})", p["measured"], f"**{p['verdict']}**"]
                for decoding, points in mixes.items() for p in points)
        lines += [*markdown_table(["claim", "measured", "verdict"], rows), ""]
    return lines


# ---------------------------------------------------------------------------------------------------- runs and speed


def runs_folder(results_csv: Path) -> Path | None:
    """``runs/`` beside the CSV, where the sweep trains (None when the CSV was copied away from it)."""
    folder = results_csv.parent / "runs"
    return folder if folder.is_dir() else None


def read_losses(runs: Path, names: Sequence[str]) -> dict[str, pd.DataFrame]:
    """Each run's logged metrics (``read_metrics``), for the runs that have logs."""
    from .train import read_metrics

    out = {}
    for name in names:
        metrics = read_metrics(runs / name)
        if not metrics.empty:
            out[name] = metrics
    return out


def recipe_changes(results_csv: Path) -> list[str]:
    """How the sweep's recipes (its ``sweep.json`` beside the CSV) differ from the recipe table, one line per preset
    run with another budget, batch or learning rate (``tsfm sweep --tokens``); none where they match or were not
    recorded (a marker older than the record stands for the table)."""
    marker = results_csv.parent / "sweep.json"
    recorded = recorded_recipes(json.loads(marker.read_text())) if marker.is_file() else {}
    table = recipes_record(RECIPES)
    lines = []
    for preset, recipe in sorted(recorded.items()):
        changed = [f"{key} {recipe[key]:g} (table: {value:g})" for key, value in table.get(preset, {}).items()
                   if key in recipe and recipe[key] != value]
        if changed:
            lines.append(f"- {preset}: {', '.join(changed)}")
    return lines


def budget_section(frame: pd.DataFrame, presets: Sequence[str], changes: Sequence[str] = ()) -> list[str]:
    """Tokens each backbone saw at each preset, per parameter, beside its losses.

    The rule is stated next to what the runs actually saw, and the validation loss next to the benchmark tables, so
    a reader can see where the two judges disagree (the held-out series are not the benchmark's). ``changes``
    (:func:`recipe_changes`) names where this sweep left the recipe table the rule describes.
    """
    needed = ("tokens_seen", "steps", "batch_size", "val_loss", "train_loss")
    lines = ["## Budget and losses per backbone and preset", "", BUDGET_RULE, ""]
    if changes:
        lines += ["**This sweep does not follow the recipe table** at these presets (`tsfm sweep --tokens`):", "",
                  *changes, ""]
    if any(c not in frame.columns for c in needed):
        return [*lines, f"(the CSV lacks some of {', '.join(needed)}: written before they were recorded)", ""]
    per_run = frame.drop_duplicates("run")
    rows = []
    for preset in presets:
        for backbone, group in per_run[per_run["preset"] == preset].groupby("backbone", sort=True):
            tokens = float(group["tokens_seen"].mean())
            rows.append([preset, f"`{backbone}`", str(len(group)), format_parameters(group["parameters"].mean()),
                         f"{tokens / 1e6:.1f}M", f"{tokens / group['parameters'].mean():.1f}",
                         f"{int(group['steps'].iloc[0]):,} x {int(group['batch_size'].iloc[0])}",
                         _mean_and_range(group["val_loss"]), _mean_and_range(group["train_loss"])])
    header = ["preset", "backbone", "runs", "parameters", "tokens seen", "tokens per parameter", "steps x batch",
              "validation loss", "training loss (last)"]
    return [*lines, "Losses are the mean over seeds (min-max when several). The validation loss is the selected "
            "checkpoint's, on windows of the corpus's held-out series; their number follows the preset's batch size, "
            "so compare it within a preset, not across presets.", "", *markdown_table(header, rows), ""]


def _mean_and_range(values: pd.Series) -> str:
    """Mean over seeds, with the min-max range when several; a run without the value (older code left the training
    loss out when a resumed call trained no step) is named rather than averaged in as nan."""
    values = values.astype(float)
    missing = int(values.isna().sum())
    if missing == len(values):
        return "not recorded"
    if missing:
        return f"{_mean_and_range(values.dropna())}; {missing} run(s) not recorded"
    text = f"{values.mean():.4f}"
    return text if len(values) == 1 else f"{text} ({values.min():.4f}-{values.max():.4f})"


def compiled(runs: Path | None, name: str) -> str:
    """Whether a run trained under torch.compile (its provenance's ``train_config.compile``): "yes", "no", or "-"
    where the run's provenance is not beside the CSV. The same math either way; it changes tokens/s."""
    path = runs / name / "provenance.json" if runs is not None else None
    if path is None or not path.is_file():
        return "-"
    return "yes" if json.loads(path.read_text()).get("train_config", {}).get("compile") else "no"


def speed_section(frame: pd.DataFrame, runs: Path | None = None) -> list[str]:
    """Tokens/s per run: one row per run (every row of a run repeats the same training figures), and whether it was
    compiled (read from ``runs``)."""
    columns = [c for c in ("device", "tokens_seen", "train_seconds", "tokens_per_s") if c in frame.columns]
    if not columns:
        return []
    per_run = frame.drop_duplicates("run").sort_values(["preset", "backbone", "seed"], key=_preset_sort_key)
    rows = []
    for _, row in per_run.iterrows():
        rows.append([f"`{row['run']}`", *(_format_value(row[c]) for c in columns), compiled(runs, row["run"])])
    header = ["run", *[c.replace("_", " ") for c in columns], "compiled"]
    lines = ["## Training speed", "", *markdown_table(header, rows), ""]
    if "train_seconds" in per_run:
        seconds = per_run["train_seconds"].astype(float)
        lines += [f"Training time summed over the {seconds.notna().sum()} runs: {seconds.sum():,.0f} s "
                  f"({seconds.sum() / 60:,.1f} minutes). Runs that shared a GPU side by side overlap in it, so the "
                  "device time they took is less; scoring and the machines' start are not in it (each device call's "
                  "wall and device time: `benchmarks/results/*/README.md`).",
                  "A compiled run (`tsfm sweep --compile`) computes the same loss with faster steps: compare tokens/s "
                  "between runs compiled alike.", ""]
    return lines


def _preset_sort_key(column: pd.Series) -> pd.Series:
    if column.name != "preset":
        return column
    order = {p: i for i, p in enumerate(preset_order(column))}
    return column.map(order)


def _format_value(value: object) -> str:
    if isinstance(value, float | np.floating):
        return "-" if np.isnan(value) else f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"
    if isinstance(value, int | np.integer):
        return f"{int(value):,}"
    return str(value)


# ------------------------------------------------------------------------------------------------------------- plots


def _figure(ncols: int, width: float = 5.0, height: float = 4.0) -> tuple[object, list[object]]:
    """An Agg-backed figure with ``ncols`` axes side by side (no pyplot state touched)."""
    fig = agg_figure(width * ncols, height)
    return fig, list(fig.subplots(1, ncols, squeeze=False)[0])


def _colours(backbones: Sequence[str]) -> dict[str, object]:
    """One fixed colour per backbone, shared by every figure of the report."""
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {b: cmap(i % 10) for i, b in enumerate(sorted(backbones))}


def plot_scaling(stats: pd.DataFrame, decoding: str, path: Path, colours: dict[str, object]) -> Path:
    """Log-log MASE and CRPS against parameters, one line per backbone, min-max over seeds as error bars."""
    from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullLocator

    fig, axes = _figure(2)
    cells = stats[stats["decoding"] == decoding]
    for ax, metric in zip(axes, METRICS, strict=True):
        for backbone, group in cells.groupby("backbone"):
            group = group.sort_values("parameters")
            err = np.vstack([group[metric] - group[f"{metric}_min"], group[f"{metric}_max"] - group[metric]])
            ax.errorbar(group["parameters"], group[metric], yerr=err, marker="o", capsize=3, label=backbone,
                        color=colours[backbone])
        ax.set_xscale("log")
        ax.set_yscale("log")
        # scores near 1 span less than a decade, where log ticks leave gaps: evenly spaced labelled ticks instead
        ax.yaxis.set_major_locator(FixedLocator(_even_ticks(cells[f"{metric}_min"].min(),
                                                            cells[f"{metric}_max"].max())))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(FormatStrFormatter("%.2f"))  # "0.85" reads better than "8.5 x 10^-1"
        ax.set_xlabel("parameters")
        ax.set_ylabel(f"normalised {metric} (geometric mean)")
        base = decoding.removesuffix(READ_ALONE)  # "masked decoding, short contexts read alone"
        ax.set_title(f"{metric}, {base} decoding{decoding[len(base):]}")
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    return path


def _even_ticks(low: float, high: float, count: int = 6) -> np.ndarray:
    """About ``count`` ticks at a round step (1, 2 or 5 times a power of ten) covering ``[low, high]``."""
    raw = max(high - low, 0.05 * abs(high), 1e-6) / count  # one run, or seeds that agree: still a few ticks
    power = 10.0 ** np.floor(np.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return np.arange(np.floor(low / step), np.ceil(high / step) + 0.5) * step


def plot_losses(losses: dict[str, pd.DataFrame], backbone_of: dict[str, str], path: Path,
                colours: dict[str, object]) -> Path:
    """Training (smoothed) and validation loss against the step, one line per run, coloured by backbone."""
    fig, (train_ax, val_ax) = _figure(2)
    for name, metrics in losses.items():
        colour = colours.get(backbone_of[name], "black")
        column = next((c for c in ("train_loss_step", "train_loss") if c in metrics), None)
        if column is not None:
            rows = metrics.dropna(subset=[column])
            train_ax.plot(rows["step"], rows[column].rolling(20, min_periods=1).mean(), color=colour, label=name)
        if "val_loss" in metrics:
            rows = metrics.dropna(subset=["val_loss"])
            val_ax.plot(rows["step"], rows["val_loss"], "o-", color=colour, label=name)
    for ax, title in ((train_ax, "training loss (smoothed)"), (val_ax, "validation loss")):
        ax.set_xlabel("step")
        ax.set_ylabel("pinball loss (scaled)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    train_ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    return path


# -------------------------------------------------------------------------------------------------------------- main


def write_sweep_report(results_csv: str | os.PathLike[str], out_dir: str | os.PathLike[str], name: str = "sweep",
                       notes: Sequence[str] = (), command: str | None = None, title: str | None = None,
                       ) -> list[Path]:
    """Write ``OUT/NAME.md`` and its PNGs from a sweep's ``results.csv``; returns the files written.

    Raises:
        SweepReportError: the CSV is missing, lacks required columns or holds no scored row.
    """
    results_csv = Path(results_csv)
    frame = read_sweep(results_csv)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    presets = preset_order(frame["preset"])
    decodings = decoding_order(frame["decoding"])
    stats = cell_stats(run_scores(frame))
    colours = _colours(frame["backbone"].unique())
    written = []

    lines = [f"# {title or f'{name} report: the scaling sweep'}", "", *(f"{note}\n" for note in notes)]
    lines += ["## Scores per backbone and preset", "",
              "Each run's score is the geometric mean over configurations of MASE and CRPS divided by Seasonal "
              "Naive's; a cell is the mean over seeds, with the min-max range over seeds when there are several.", ""]
    for decoding in decodings:
        lines += scores_section(stats, decoding, presets)
        png = plot_scaling(stats, decoding, out / f"{name}_scaling_{file_label(decoding)}.png", colours)
        written.append(png)
        lines += [f"![scaling, {decoding}]({png.name})", ""]

    lines += budget_section(frame, presets, recipe_changes(results_csv))
    lines += ["## Per frequency and per term (largest preset that compares mixer families)", "",
              "Geometric means over the configurations of each frequency (config key `dataset/FREQ/term`) or term, "
              "rows of all seeds pooled.", ""]
    for decoding in decodings:
        lines += breakdown_section(frame, decoding, presets)

    lines += claim_section(stats, decodings, presets)
    lines += reading_section(results_csv)
    lines += training_section(frame, results_csv, out, name, colours, written)
    lines += speed_section(frame, runs_folder(results_csv))
    lines += sources_section(frame, results_csv, decodings, command)

    report = out / f"{name}.md"
    report.write_text("\n".join(lines).rstrip() + "\n")
    return [report, *written]


def training_section(frame: pd.DataFrame, results_csv: Path, out: Path, name: str, colours: dict[str, object],
                     written: list[Path]) -> list[str]:
    """Loss curves of every run with logs beside the CSV; says so when there are none, rather than leaving a gap."""
    lines = ["## Training and validation loss", ""]
    runs = runs_folder(results_csv)
    names = list(dict.fromkeys(frame["run"]))
    losses = read_losses(runs, names) if runs is not None else {}
    if not losses:
        where = f"{runs}" if runs is not None else f"{results_csv.parent / 'runs'} (absent)"
        return [*lines, f"No training logs found under {where}.", ""]
    backbone_of = dict(zip(frame["run"], frame["backbone"], strict=False))
    png = plot_losses(losses, backbone_of, out / f"{name}_losses.png", colours)
    written.append(png)
    return [*lines, f"Logs of {len(losses)} of {len(names)} run(s) from `{runs}`; colour by backbone.", "",
            f"![losses]({png.name})", ""]


def sources_section(frame: pd.DataFrame, results_csv: Path, decodings: Sequence[str],
                    command: str | None) -> list[str]:
    """How to make the report again and what it was made from."""
    runs = sorted(frame["run"].unique())
    lines = ["## Sources", "", f"- command: `{command}`" if command else "- command: (called in-process)",
             f"- results: `{results_csv}`, {frame.attrs.get('csv_rows', len(frame))} row(s), {len(frame)} scored, "
             f"{frame['dataset'].nunique()} configuration(s),"
             f" decodings: {', '.join(decodings)}",
             f"- runs ({len(runs)}): {', '.join(f'`{r}`' for r in runs)}"]
    return [*lines, ""]
