"""Judge candidate checkpoints against the shipped default by the rule that decides what ships, in one command.

The rule (``benchmarks/RESULTS.md``, twenty-seventh session), judged without the test windows: a candidate ships
only if

1. on the benchmark windows no test window scores, pooled over two spans (the windows that end where the test
   windows begin, and the span before those: ``scripts/eval_checkpoints.py --spans-back 2`` and ``3``), the 95% BCa
   interval of its paired geometric-mean ratio to the reference is below 1 on MASE **and** on CRPS; the unit of the
   bootstrap is one configuration on one span (65 of them on the offline benchmark), each normalised by Seasonal
   Naive on the same windows;
2. on the held-out pretraining windows (``scripts/validation_forecast.py --validation-split common``) its paired
   ratio over the held-out datasets has an interval that does not lie above 1 (its lower end at most 1: not worse,
   as far as 15 datasets can tell; they are too few to ask for better).

Every model is scored with the reference's inference settings (decoding, ``infer_nonnegative``, ``naive_blend``,
``flip_equivariant``), so a candidate is judged as it would ship; ``--inference own`` scores each model with its own
``config.json`` settings instead, which is how an inference setting is judged (the same weights with the setting
changed, as a candidate). Writes ``OUT/judge.md`` and ``OUT/judge.json`` (the verdicts, then each candidate's MASE
ratio to the reference per frequency, term and configuration: where it gains or loses) and every
model's ``all_results.csv`` per span under ``OUT/spans_back_N/``. ``--watch CONFIG`` adds one configuration's
MASE relative to Seasonal Naive per span (2 to 8 by default) and model, the view of a per-configuration must
(``yosemite_temps/5T/long``: issue 11), scored under ``OUT/watch/``. ``--cache DIR`` keeps every model's scores per
span there and reuses them when nothing that makes them has changed (the model's files, the inference settings, the
device, the span's Seasonal-Naive scores, which fingerprint its windows, and the source of ``tsfm`` and the scoring
script): the reference, scored again by every judge, is then scored once.

    PYTHONPATH=. python scripts/judge_checkpoints.py runs/a/model [runs/b/model ...] --benchmark data/benchmark \
        --real-data data/device/pretrain --out OUT [--reference default] [--device cpu] \
        [--watch yosemite_temps/5T/long] [--cache runs/judge-cache]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from eval_checkpoints import main as score_checkpoints  # sibling scripts (scripts/)
from eval_checkpoints import result_name
from validation_forecast import main as validation_forecast
from validation_loss import DATASET_PREFIX, paired_over_datasets

from tsfm.checkpoint import CONFIG_FILE, read_checkpoint_config, resolve_model_path, weight_files
from tsfm.config import ModelConfig
from tsfm.pipelines.data.frequency import step_duration
from tsfm.pipelines.evaluate import key_part, normalise, paired_ratio_interval, read_results
from tsfm.pipelines.evaluate.configs import select_configs
from tsfm.pipelines.evaluate.errors import BenchmarkError, UnknownConfigError
from tsfm.pipelines.report import markdown_table

SPANS_BACK = (2, 3)
WATCH_SPANS = (2, 3, 4, 5, 6, 7, 8)
METRICS = ("MASE", "CRPS")
REFERENCE_NAME = "reference"


def inference_settings(config: ModelConfig) -> list[str]:
    """The reference's inference settings as ``eval_checkpoints.py`` flags, so every model is scored as it ships."""
    return ["--decoding", config.decoding, "--infer-nonnegative", "on" if config.infer_nonnegative else "off",
            "--naive-blend", config.naive_blend, "--flip-equivariant", "on" if config.flip_equivariant else "off"]


def source_digest() -> str:
    """A digest of the code that turns a checkpoint into scores: every ``tsfm`` source file and the scoring script.
    Any change to them makes earlier cached scores stale (conservative: most changes would not move a score)."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted([*(root / "tsfm").rglob("*.py"), root / "scripts" / "eval_checkpoints.py"]):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def model_digest(checkpoint: str) -> bytes:
    """A checkpoint's files (config and weights) by content, not by path: read once per judge."""
    folder = resolve_model_path(checkpoint)
    digest = hashlib.sha256()
    for path in [folder / CONFIG_FILE, *weight_files(folder)]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.digest()


def score_key(model: bytes, context: bytes) -> str:
    """The cache key of one checkpoint's scores on one span: its files' digest and ``context`` (what else made the
    scores)."""
    return hashlib.sha256(context + model).hexdigest()[:32]


def restore_scores(cached: Path, out: Path, name: str) -> None:
    """Write cached scores as ``out/name/all_results.csv``, under this run's model name."""
    (out / name).mkdir(parents=True, exist_ok=True)
    pd.read_csv(cached).assign(model=name).to_csv(out / name / "all_results.csv", index=False)


def score_spans(models: dict[str, str], args: argparse.Namespace, settings: list[str], spans_back: Sequence[int],
                out_root: Path, configs: Sequence[str] = ()) -> pd.DataFrame:
    """Normalised MASE and CRPS of every model on every span (under ``out_root/spans_back_N``), one row per (model,
    configuration, span); ``configs``: only these configurations (default: all). With ``args.cache``, a model whose
    scores are cached for the same context is not scored again (nor twice in one run: two copies of one model)."""
    frames = []
    code = source_digest() if args.cache else ""
    files = {name: model_digest(path) for name, path in models.items()} if args.cache else {}
    for spans in spans_back:
        out = out_root / f"spans_back_{spans}"
        common = ["--benchmark", str(args.benchmark), "--out", str(out), "--spans-back", str(spans),
                  *(["--device", args.device] if args.device else []), *(["--configs", *configs] if configs else [])]
        score_checkpoints(["seasonal_naive", *common])
        normaliser = out / "seasonal_naive" / "all_results.csv"
        if not normaliser.is_file():
            continue  # no chosen configuration reaches this far back (eval_checkpoints.py said so)
        context = json.dumps([code, settings, args.device, list(configs)]).encode() + normaliser.read_bytes()
        keys, to_score = {}, list(models)
        if args.cache:
            keys = {name: score_key(files[name], context) for name in models}
            first: dict[str, str] = {}
            for name, key in keys.items():
                first.setdefault(key, name)
            to_score = [name for name, key in keys.items()
                        if first[key] == name and not (args.cache / f"{key}.csv").is_file()]
        if to_score:
            score_checkpoints([*(models[name] for name in to_score), "--names", *to_score, "--normaliser",
                               str(normaliser), *settings, *common])
        if args.cache:
            args.cache.mkdir(parents=True, exist_ok=True)
            for name in to_score:
                shutil.copyfile(out / name / "all_results.csv", args.cache / f"{keys[name]}.csv")
            for name in set(models) - set(to_score):
                restore_scores(args.cache / f"{keys[name]}.csv", out, name)
        results = pd.concat([read_results(out / name) for name in models], ignore_index=True)
        frames.append(normalise(results, read_results(out / "seasonal_naive")).assign(spans_back=spans))
    if not frames:
        return pd.DataFrame(columns=["model", "dataset", "spans_back", *METRICS])
    return pd.concat(frames, ignore_index=True)


def benchmark_verdicts(scores: pd.DataFrame, candidates: list[str]) -> dict[str, dict[str, list[float] | int]]:
    """Each candidate's paired ratio ``[ratio, low, high]`` to the reference per metric, over the (configuration,
    span) units both scored."""
    keyed = scores.set_index(["model", "dataset", "spans_back"])
    reference = keyed.loc[REFERENCE_NAME]
    out = {}
    for name in candidates:
        ours = keyed.loc[name]
        units = ours.index.intersection(reference.index)
        values = pd.concat([ours.loc[units, list(METRICS)], reference.loc[units, list(METRICS)]], axis=1)
        units = units[(np.isfinite(values) & (values > 0)).all(axis=1).to_numpy()]  # undefined ratios: as summarise
        out[name] = {metric: list(paired_ratio_interval(ours.loc[units, metric].to_numpy(),
                                                        reference.loc[units, metric].to_numpy()))
                     for metric in METRICS}
        out[name]["units"] = len(units)
    return out


BREAKDOWNS = {"frequency": "freq", "term": "term", "configuration": None}
"""The groupings of :func:`ratio_breakdown`: the part of a configuration key (``dataset/FREQ/term``,
:func:`tsfm.pipelines.evaluate.key_part`) each groups by, or None for the whole key."""


def ratio_breakdown(scores: pd.DataFrame, candidates: list[str], by: str = "frequency") -> pd.DataFrame:
    """Each candidate's MASE ratio to the reference per group (rows: frequency, term or configuration, as
    :data:`BREAKDOWNS` names) and over all units (last row): geometric means over the (configuration, span) units
    both scored. Not part of the verdict; it says where a candidate gains or loses, which the pooled interval hides
    (a configuration of one series, such as ``yosemite_temps``, can carry a frequency alone)."""
    part = BREAKDOWNS[by]
    keyed = scores.set_index(["model", "dataset", "spans_back"])["MASE"]
    columns = {}
    for name in candidates:
        ratio = np.log(keyed.loc[name] / keyed.loc[REFERENCE_NAME]).dropna()
        ratio = ratio[np.isfinite(ratio)]
        dataset = ratio.index.get_level_values("dataset")
        groups = dataset if part is None else key_part(dataset, part)
        by_group = np.exp(ratio.groupby(groups).mean())
        if by == "frequency":  # the finest first, as the benchmark report orders them
            by_group = by_group.sort_index(key=lambda index: index.map(step_duration))
        columns[name] = pd.concat([by_group, pd.Series({"all": float(np.exp(ratio.mean()))})])
    return pd.DataFrame(columns)


def watch_table(scores: pd.DataFrame, config: str, names: Sequence[str]) -> pd.DataFrame:
    """One configuration's MASE relative to Seasonal Naive per model (rows) and span (columns), with the geometric
    mean over the spans and how many spans lie below Seasonal Naive: the per-configuration view a must such as
    "below Seasonal Naive on every 5-minute configuration" needs, on more windows than the verdict's two spans (a
    configuration of one series gets three windows a span). NaN where a span could not be scored."""
    rows = scores[scores["dataset"] == config]
    mase = rows.pivot_table(index="model", columns="spans_back", values="MASE") if len(rows) else pd.DataFrame()
    mase = mase.reindex(index=list(names))
    table = mase.copy()
    table["geometric mean"] = np.exp(np.log(mase).mean(axis=1))
    table["spans below"] = (mase < 1).sum(axis=1).astype(str) + f" of {mase.shape[1]}"
    return table


def _watch_cell(value: float | str) -> str:
    """A :func:`watch_table` cell as printed: a ratio to three places, "-" where the span was not scored."""
    if isinstance(value, str):
        return value
    return "-" if np.isnan(value) else f"{value:.3f}"


def validation_verdicts(models: dict[str, str], args: argparse.Namespace,
                        inference: dict[str, ModelConfig]) -> dict[str, list[float] | None]:
    """Each candidate's paired ratio to the reference over the held-out datasets (``validation_forecast.py``), each
    model forecasting with the decoding, blend, clamp and sign-flip average of its ``inference`` config: every
    setting any model uses is scored for all, then each model's row is paired with the reference's (None where
    fewer than two held-out datasets have windows)."""
    flips = {config.flip_equivariant for config in inference.values()}
    out_file = args.out / "validation_forecast_common.json"
    validation_forecast([*dict.fromkeys(models.values()), "--real-data", str(args.real_data),
                         "--validation-split", "common",
                         "--flip", "both" if len(flips) > 1 else ("on" if flips.pop() else "off"),
                         "--naive-blends", ",".join(sorted({c.naive_blend for c in inference.values()})),
                         "--decodings", ",".join(sorted({c.decoding for c in inference.values()})),
                         "--out", str(out_file), *(["--device", args.device] if args.device else [])])
    rows = json.loads(out_file.read_text())["rows"]

    def row_of(name: str) -> dict:
        config, member = inference[name], lambda row: row["members"][0]
        return next(row for row in rows if member(row)["model"] == models[name]
                    and member(row)["decoding"] == config.decoding
                    and member(row)["flip_invariant"] == config.flip_equivariant
                    and member(row)["naive_blend"] == config.naive_blend
                    and row["infer_nonnegative"] == config.infer_nonnegative)

    reference = row_of(REFERENCE_NAME)
    enough = sum(group.startswith(DATASET_PREFIX) for group in reference) >= 2
    return {name: list(paired_over_datasets(row_of(name), reference)) if enough else None
            for name in models if name != REFERENCE_NAME}


def verdict(bench: dict[str, list[float] | int], validation: list[float] | None) -> str:
    """``ships`` only where both benchmark intervals lie below 1 and the validation interval does not lie above 1."""
    below = all(bench[metric][2] < 1 for metric in METRICS)
    held_out = validation is not None and validation[1] <= 1
    return "ships" if below and held_out else "does not ship"


def comma_separated_spans(text: str) -> tuple[int, ...]:
    """``"2,3"`` -> ``(2, 3)``."""
    return tuple(int(value) for value in text.split(","))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("candidates", nargs="+", help="checkpoint folders to judge")
    parser.add_argument("--reference", default="default", help="the shipped model to beat (default: 'default')")
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--real-data", type=Path, required=True, help="the pretraining corpus (held-out windows)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default=None)
    parser.add_argument("--spans-back", type=comma_separated_spans, default=SPANS_BACK,
                        help="comma-separated spans of windows before the series' ends (default 2,3; 1 would be "
                             "the test windows, which never judge)")
    parser.add_argument("--inference", choices=("reference", "own"), default="reference",
                        help="score every model with the reference's inference settings (default: each candidate "
                             "as it would ship in its place) or each with its own config.json's (to judge an "
                             "inference setting: the same weights with the setting changed)")
    parser.add_argument("--watch", action="append", default=[], metavar="CONFIG",
                        help="also score this configuration (dataset/FREQ/term) alone on --watch-spans and print its "
                             "MASE relative to Seasonal Naive per span and model (repeatable; not part of the "
                             "verdict)")
    parser.add_argument("--watch-spans", type=comma_separated_spans, default=WATCH_SPANS,
                        help="spans of the --watch tables (default 2,...,8; 2 or more)")
    parser.add_argument("--cache", type=Path, default=None,
                        help="folder of scores kept between judges: a model whose files, settings, device, span "
                             "windows and scoring code are unchanged is not scored again (the reference, mostly)")
    args = parser.parse_args(argv)
    for flag, given in (("--spans-back", args.spans_back), ("--watch-spans", args.watch_spans)):
        if min(given) < 2:
            parser.error(f"{flag} takes spans of 2 or more (1 is the test windows), got {given}")
    if args.watch:
        try:  # an unknown configuration is refused before any model is scored
            select_configs(args.benchmark, args.watch)
        except (BenchmarkError, UnknownConfigError) as err:
            parser.error(f"--watch: {err}")
    names = [result_name(c) for c in args.candidates]
    if len(set(names)) < len(names) or REFERENCE_NAME in names:
        parser.error(f"candidates need distinct folder names other than {REFERENCE_NAME!r}, got {names}")
    models = {REFERENCE_NAME: args.reference, **dict(zip(names, args.candidates, strict=True))}
    config, _ = read_checkpoint_config(resolve_model_path(args.reference))
    settings = inference_settings(config) if args.inference == "reference" else []
    args.out.mkdir(parents=True, exist_ok=True)

    scores = score_spans(models, args, settings, args.spans_back, args.out)
    watched = score_spans(models, args, settings, args.watch_spans, args.out / "watch", args.watch) \
        if args.watch else None
    bench = benchmark_verdicts(scores, names)
    breakdowns = {by: ratio_breakdown(scores, names, by) for by in BREAKDOWNS}
    own = {name: read_checkpoint_config(resolve_model_path(path))[0] for name, path in models.items()}
    # the held-out windows with the settings the benchmark used: the reference's (each model keeps its decoding, as
    # validation_forecast.py forecasts by default) or each model's own
    inference = own if args.inference == "own" else {
        name: dataclasses.replace(config, decoding=own[name].decoding) for name in models}
    validation = validation_verdicts(models, args, inference)
    judged = {name: {"benchmark": bench[name], "validation": validation[name],
                     "verdict": verdict(bench[name], validation[name])} for name in names}

    def interval(values: list[float] | None) -> str:
        return "-" if values is None else f"{values[0]:.4f} [{values[1]:.4f}, {values[2]:.4f}]"

    rows = ([name, str(bench[name]["units"]), interval(bench[name]["MASE"]), interval(bench[name]["CRPS"]),
             interval(validation[name]), f"**{judged[name]['verdict']}**"] for name in names)
    table = markdown_table(["candidate", "units", "MASE ratio [95%]", "CRPS ratio [95%]",
                            "held-out windows ratio [95%]", "verdict"], rows)
    text = "\n".join([
        f"# Candidates against `{args.reference}`", "",
        f"Benchmark windows {', '.join(f'{s} spans back' for s in args.spans_back)} pooled, "
        + (f"with the reference's inference ({' '.join(settings)})" if settings
           else "each model with its own inference settings (--inference own)")
        + f"; command: `python {' '.join(sys.argv)}`.", "", *table, ""])
    for by, breakdown in breakdowns.items():
        text += "\n".join([
            "", f"MASE ratio to the reference per {by} (geometric mean over configuration-spans; not part of the "
            "verdict):", "",
            *markdown_table([by, *names], ([index, *(f"{value:.3f}" for value in row)]
                                           for index, row in breakdown.iterrows())), ""])
    watch = {config: watch_table(watched, config, list(models)) for config in args.watch}
    for config, table in watch.items():
        text += "\n".join([
            "", f"`{config}` alone, MASE / Seasonal Naive's on the same windows, per span back (not part of the "
            "verdict):", "",
            *markdown_table(["model", *map(str, table.columns)],
                            ([name, *map(_watch_cell, row)] for name, row in table.iterrows())), ""])
    (args.out / "judge.md").write_text(text)
    (args.out / "judge.json").write_text(json.dumps({"reference": args.reference, "inference": args.inference,
                                                     "settings": settings,
                                                     "spans_back": list(args.spans_back), "candidates": judged,
                                                     **{f"mase_ratio_by_{by}": breakdown.to_dict()
                                                        for by, breakdown in breakdowns.items()},
                                                     "watch": {config: {name: {str(k): v for k, v in row.items()}
                                                                        for name, row in table.iterrows()}
                                                               for config, table in watch.items()}},
                                                    indent=2) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
