"""Score tsfm checkpoints on a benchmark with GIFT-Eval's protocol, normalised by committed Seasonal-Naive rows.

Why a script beside ``tsfm evaluate``: that command re-runs Seasonal Naive (statsforecast) as the normaliser on
every configuration, and the GPU machine has no statsforecast. Seasonal Naive is deterministic, so its committed
rows (``reports/results/seasonal_naive/all_results.csv``, made by ``tsfm evaluate``) normalise just as well. This
script runs only the tsfm models (on the GPU when there is one), writes ``OUT/<name>/all_results.csv`` per model in
the same format, and prints the normalised geometric means and how many configurations beat Seasonal Naive.

    PYTHONPATH=. python3 scripts/eval_checkpoints.py runs/a/model runs/b/model --benchmark data/benchmark \
        --out $OUT/eval [--configs m4_hourly/H/short ...] [--device cuda] \
        [--decoding autoregressive] [--infer-nonnegative on] [--naive-blend inverse_mae] \
        [--before-test | --spans-back 3 --normaliser SN_ON_THOSE_WINDOWS/all_results.csv]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from tsfm.config import DECODINGS, NAIVE_BLENDS
from tsfm.pipelines.data.gift_eval import GiftEvalDataset, SeriesTooShortError
from tsfm.pipelines.evaluate import (
    RESULTS_FILE,
    eval_model,
    evaluate_predictor,
    normalise,
    read_results,
    result_row,
    select_configs,
    summarise,
    with_inference,
)

NORMALISER = Path(__file__).resolve().parents[1] / "reports/results/seasonal_naive/all_results.csv"


def result_name(checkpoint: str) -> str:
    """A checkpoint's result name: its run folder for ``RUN/model`` (as ``tsfm train`` writes), else its own name."""
    path = Path(checkpoint)
    return path.parent.name if path.name == "model" else path.name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="checkpoint folders (or 'default')")
    parser.add_argument("--names", nargs="+", default=None, help="result names (default: the folders' parents)")
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--configs", nargs="+", default=None)
    parser.add_argument("--normaliser", type=Path, default=NORMALISER, help="Seasonal-Naive all_results.csv")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--device", default=None)
    parser.add_argument("--decoding", choices=DECODINGS, default=None,
                        help="score with this decoding instead of the one in each checkpoint's config.json")
    parser.add_argument("--infer-nonnegative", choices=("on", "off"), default=None,
                        help="clamp forecasts of never-negative series at 0 (on) or not (off), instead of what each "
                             "checkpoint's config.json says")
    parser.add_argument("--naive-blend", choices=NAIVE_BLENDS, default=None,
                        help="lean forecasts towards Seasonal Naive by an in-context backtest (tsfm.naive_blend), "
                             "instead of what each checkpoint's config.json says")
    parser.add_argument("--flip-equivariant", choices=("on", "off"), default=None,
                        help="average each forecast with its mirror image's turned back (on) or not (off), instead "
                             "of what each checkpoint's config.json says (ModelConfig.flip_equivariant)")
    windows = parser.add_mutually_exclusive_group()
    windows.add_argument("--before-test", dest="spans_back", action="store_const", const=2, default=1,
                         help="score the windows that end where the test windows begin (choosing inference settings "
                              "without the test windows); --normaliser must then hold Seasonal Naive's rows on them")
    windows.add_argument("--spans-back", type=int, dest="spans_back", default=1,
                         help="score the windows that begin this many test spans before each series' end (1: the "
                              "test windows, 2: as --before-test, 3: the span before those); configurations whose "
                              "series are too short for them are skipped and named; --normaliser must hold Seasonal "
                              "Naive's rows on the same windows")
    parser.add_argument("--context-length", type=int, default=None,
                        help="last steps of each series the model reads (default: the model's own)")
    args = parser.parse_args(argv)
    if args.spans_back < 1:
        parser.error(f"--spans-back must be at least 1 (1: the test windows), got {args.spans_back}")
    names = args.names or [result_name(m) for m in args.models]
    if len(names) != len(args.models):
        parser.error("--names needs one name per model")
    chosen = select_configs(args.benchmark, args.configs)
    baseline = read_results(args.normaliser)
    summary = {}
    scratch = Path(tempfile.mkdtemp(prefix="eval_checkpoints_"))
    settings: dict[str, object] = {}  # inference-only fields overridden for every model
    if args.decoding is not None:
        settings["decoding"] = args.decoding
    if args.infer_nonnegative is not None:
        settings["infer_nonnegative"] = args.infer_nonnegative == "on"
    if args.naive_blend is not None:
        settings["naive_blend"] = args.naive_blend
    if args.flip_equivariant is not None:
        settings["flip_equivariant"] = args.flip_equivariant == "on"
    for spec, name in zip(args.models, names, strict=True):
        if settings:
            spec = str(with_inference(spec, scratch / name, **settings))
        runner = eval_model(spec, batch_size=args.batch_size, device=args.device)
        rows, started, too_short = [], time.perf_counter(), []
        for dataset, term in chosen:
            ds = GiftEvalDataset.per_variate(dataset, term, root=args.benchmark)
            try:
                ds.check_horizon(args.spans_back)
            except SeriesTooShortError:
                too_short.append(ds.config_key)
                continue
            predictor = runner.make_predictor(ds)
            if args.context_length is not None:  # TsfmPredictor: the window predict() reads
                predictor.context_length = args.context_length
            rows.append(result_row(name, ds, evaluate_predictor(predictor, ds, spans_back=args.spans_back)))
        if too_short:
            print(f"{name}: skipped {len(too_short)} configuration(s) whose series are too short for windows "
                  f"{args.spans_back} test spans back: {', '.join(too_short)}")
        (args.out / name).mkdir(parents=True, exist_ok=True)
        if not rows:  # no results file rather than an empty one, nor a stale one from an earlier call
            (args.out / name / RESULTS_FILE).unlink(missing_ok=True)
            print(f"{name}: no configuration could be scored {args.spans_back} test spans back")
            continue
        frame = pd.DataFrame(rows)
        frame.to_csv(args.out / name / RESULTS_FILE, index=False)
        normalised = normalise(frame, baseline)
        if normalised.empty:  # the raw results stand; a caller normalises them by Seasonal Naive on other windows
            print(f"{name}: wrote raw results; {args.normaliser} holds none of its configurations to normalise by")
            continue
        means = summarise(normalised)[name]
        beats = int((normalised["MASE"] < 1).sum())
        summary[name] = {"seconds": round(time.perf_counter() - started, 1), "beats_seasonal_naive_mase": beats,
                         "configs": len(normalised), **{k: v for k, v in means.items()}}
        print(f"{name}: MASE {means['overall']['MASE']:.3f} CRPS {means['overall']['CRPS']:.3f} "
              f"(beats SN on MASE in {beats}/{len(normalised)}) "
              f"[{summary[name]['seconds']} s]", flush=True)
    summary_file = args.out / "summary.json"  # runs into the same folder add to it
    earlier = json.loads(summary_file.read_text()) if summary_file.is_file() else {}
    summary_file.write_text(json.dumps({**earlier, **summary}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
