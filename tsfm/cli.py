"""The ``tsfm`` command line: one subcommand per function, registered with ``@command``.

Adding a command is one decorated function: its arguments are declared in the decorator and it returns an exit
code. ``main`` turns input errors (``ForecastInputError``, ``CommandError``, unreadable files) into one line
``error: ...`` on stderr and exit code 2, without a traceback; anything else is a bug and keeps its traceback.
Heavy modules (torch, pandas, matplotlib) are imported inside the commands so that ``tsfm --help`` is instant.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EXIT_OK = 0
EXIT_USAGE = 2  # bad input, as argparse uses for bad arguments

TABLE_ROWS_PER_SERIES = 3
TABLE_MAX_SERIES = 5
DATA_SUFFIXES = (".csv", ".parquet", ".pq")


class CommandError(Exception):
    """A user-facing failure of a command: printed as ``error: <message>`` with exit code 2."""


@dataclass(frozen=True)
class Argument:
    """The positional and keyword arguments of one ``ArgumentParser.add_argument`` call."""

    flags: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    arguments: tuple[Argument, ...]
    run: Callable[[argparse.Namespace], int]


COMMANDS: dict[str, Command] = {}


def arg(*flags: str, **options: Any) -> Argument:
    """Declare an argument exactly as ``add_argument(*flags, **options)`` would take it."""
    return Argument(flags, options)


def command(name: str, help: str, *arguments: Argument) -> Callable[[Callable[[argparse.Namespace], int]], Any]:
    """Register ``run(args) -> exit code`` as subcommand ``name``."""

    def register(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        if name in COMMANDS:
            raise ValueError(f"command {name!r} is registered twice")
        COMMANDS[name] = Command(name, help, arguments, run)
        return run

    return register


def build_parser() -> argparse.ArgumentParser:
    """The parser with every registered command as a subcommand."""
    from tsfm import __version__

    parser = argparse.ArgumentParser(prog="tsfm", description="Time-series foundation models: forecast, inspect.")
    parser.add_argument("--version", action="version", version=f"tsfm {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for cmd in COMMANDS.values():
        sub = subparsers.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        for argument in cmd.arguments:
            sub.add_argument(*argument.flags, **argument.options)
        sub.set_defaults(run=cmd.run)
    from tsfm.pipelines.state_tracking.cli import register as register_tasks  # `tsfm tasks run|report` (issue 13)
    register_tasks(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tsfm`` script; returns the exit code instead of exiting (so tests call it)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse exits on --help, --version and bad arguments
        return int(exit_.code or 0)
    if getattr(args, "run", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return args.run(args)
    except _user_errors() as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions caused by the user's input rather than by a bug."""
    from tsfm.df_utils import ForecastInputError

    return (CommandError, ForecastInputError, FileNotFoundError, IsADirectoryError, PermissionError)


# ----------------------------------------------------------------------------------------------------------------
# Shared arguments and helpers

MODEL_ARG = arg(
    "--model", default="default", help="'default' (the model shipped with tsfm) or a checkpoint folder"
)
DEVICE_ARG = arg("--device", default=None, help="torch device, e.g. cpu or cuda (default: cpu)")


def _quantile_levels(text: str) -> list[float]:
    """argparse type for ``0.1,0.5,0.9``; range checks happen in the API so the messages stay the same."""
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        message = f"expected comma-separated numbers such as 0.1,0.5,0.9, got {text!r}"
        raise argparse.ArgumentTypeError(message) from None


def _load_model(name_or_path: str, device: str | None) -> Any:
    """Load a model, turning a bad name or path into a one-line error."""
    from tsfm import forecast

    try:
        return forecast.resolve_model(name_or_path, device)
    except (OSError, ValueError) as err:
        raise CommandError(f"cannot load model {name_or_path!r}: {err}") from None


def _read_table(path: Path) -> Any:
    """Read a CSV or Parquet file into a DataFrame."""
    import pandas as pd

    suffix = path.suffix.lower()
    if suffix not in DATA_SUFFIXES:
        raise CommandError(f"{path}: unsupported file type {suffix or '(none)'!r}; use .csv or .parquet")
    if not path.is_file():
        raise CommandError(f"{path}: no such file")
    try:
        return pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path)
    except (ValueError, OSError, pd.errors.ParserError) as err:
        raise CommandError(f"{path}: cannot read it as {suffix[1:]}: {err}") from None


def _check_output_path(path: Path | None, suffixes: tuple[str, ...]) -> None:
    """Fail before the forecast runs, not after, when an output file type is wrong."""
    if path is not None and path.suffix.lower() not in suffixes:
        raise CommandError(f"{path}: unsupported output type {path.suffix or '(none)'!r}; use {' or '.join(suffixes)}")


def _write_table(frame: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)


def _summary_table(forecast: Any, id_column: str) -> str:
    """The first rows of the first series, so a terminal shows the shape of the result at a glance."""
    item_ids = forecast[id_column].unique()
    shown = forecast[forecast[id_column].isin(item_ids[:TABLE_MAX_SERIES])]
    table = shown.groupby(id_column, sort=False).head(TABLE_ROWS_PER_SERIES)
    text = table.to_string(index=False, float_format=lambda x: f"{x:.6g}")
    horizon = len(forecast) // max(len(item_ids), 1)
    shown_note = f" (first {TABLE_ROWS_PER_SERIES} rows of at most {TABLE_MAX_SERIES} series shown)"
    return f"{text}\n{len(item_ids)} series x {horizon} steps{shown_note}"


# ----------------------------------------------------------------------------------------------------------------
# Commands


@command(
    "forecast",
    "Forecast every series of a long-format CSV or Parquet file (one row per series and timestamp).",
    arg("data", type=Path, help="input .csv or .parquet with id, timestamp and target columns"),
    arg("-H", "--prediction-length", type=int, required=True, help="steps to forecast per series"),
    MODEL_ARG,
    arg("--id-column", default="item_id", help="series id column (default: item_id)"),
    arg("--timestamp-column", default="timestamp", help="timestamp column (default: timestamp)"),
    arg("--target", default="target", help="target column (default: target)"),
    arg("--freq", default=None, help="pandas frequency such as h, D, W-SUN, MS; default: inferred per series"),
    arg("--quantile-levels", type=_quantile_levels, default=None, help="comma-separated, default 0.1,0.2,...,0.9"),
    arg("--context-length", type=int, default=None, help="last steps of each series to use (default: the model's)"),
    arg("--batch-size", type=int, default=256, help="series per forward pass (default: 256)"),
    DEVICE_ARG,
    arg("-o", "--output", type=Path, default=None, help="write the forecast to this .csv or .parquet file"),
    arg("--plot", type=Path, default=None, help="write a PNG of the first series' forecasts"),
)
def forecast_command(args: argparse.Namespace) -> int:
    from tsfm.config import DEFAULT_QUANTILE_LEVELS
    from tsfm.forecast import predict_df

    _check_output_path(args.output, (".csv", ".parquet", ".pq"))
    _check_output_path(args.plot, (".png",))
    data = _read_table(args.data)
    model = _load_model(args.model, args.device)
    levels = args.quantile_levels if args.quantile_levels is not None else DEFAULT_QUANTILE_LEVELS
    columns = {"id_column": args.id_column, "timestamp_column": args.timestamp_column, "target": args.target}
    forecast = predict_df(
        data,
        args.prediction_length,
        model=model,
        quantile_levels=levels,
        freq=args.freq,
        batch_size=args.batch_size,
        context_length=args.context_length,
        **columns,
    )
    print(_summary_table(forecast, args.id_column))
    if args.output is not None:
        _write_table(forecast, args.output)
        print(f"wrote {args.output}")
    if args.plot is not None:
        from tsfm.plotting import plot_forecast

        plot_forecast(data, forecast, path=args.plot, quantile_levels=levels, **columns)
        print(f"wrote {args.plot}")
    return EXIT_OK


@command("info", "Show the package, the model and the machine.", MODEL_ARG, DEVICE_ARG)
def info_command(args: argparse.Namespace) -> int:
    """Print what a bug report needs; a model that fails to load still leaves the rest printed (exit code 2)."""
    import torch

    from tsfm import __version__

    rows: list[tuple[str, Any]] = [("tsfm", __version__), ("model", args.model)]
    problem = None
    try:
        rows += _model_rows(_load_model(args.model, args.device))
    except CommandError as err:
        problem = err
        rows.append(("backbone", "(model not loaded)"))
    rows += [
        ("torch", torch.__version__),
        ("cuda", _cuda_description(torch)),
        ("mps", torch.backends.mps.is_available()),
        ("backbones", ", ".join(_registered_backbones())),
    ]
    width = max(len(key) for key, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def _model_rows(model: Any) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = [
        ("backbone", model.config.backbone),
        ("parameters", f"{sum(p.numel() for p in model.parameters()):,}"),
    ]
    return rows + [(f"config.{key}", value) for key, value in model.config.to_dict().items()]


def _cuda_description(torch: Any) -> str:
    if not torch.cuda.is_available():
        return "not available"
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return f"{len(names)} device(s): {', '.join(names)}"


def _registered_backbones() -> list[str]:
    from tsfm.backbones import available_backbones

    return list(available_backbones())


@command(
    "train",
    "Pretrain a model on synthetic series and a real corpus (on the GPU when there is one); resumes a run whose "
    "--out already holds a checkpoint. Writes OUT/model (a tsfm checkpoint), OUT/checkpoints, OUT/logs, OUT/loss.png.",
    arg("--backbone", default="xlstm[3:1]", help="registered backbone spec, e.g. xlstm[3:1], mamba2, gdn[neg_eigval]"),
    arg("--preset", default="1M", help="scale preset: 1M, 3M, 10M, 40M or 80M (default: 1M)"),
    arg("--out", type=Path, required=True, help="run folder (resumed if it holds checkpoints/last.ckpt)"),
    arg("--steps", type=int, default=1000, help="optimizer steps of the whole run (default: 1000)"),
    arg("--batch-size", type=int, default=64, help="windows per step (default: 64)"),
    arg("--learning-rate", type=float, default=1e-3, help="peak AdamW learning rate (default: 1e-3)"),
    arg("--warmup-steps", type=int, default=100, help="linear warm-up steps (default: 100)"),
    arg("--context-length", type=int, default=2048, help="longest training context in steps (default: 2048)"),
    arg("--horizon-patches", type=int, default=None,
        help="future patches scored per window (the model's train_horizon_patches; default: the preset's)"),
    arg("--mask-ratio", type=float, default=0.15, help="share of context patches hidden in runs (default: 0.15)"),
    arg("--real-data", type=Path, default=None,
        help="GIFT-Eval-format root of real series (e.g. from `tsfm data build-pretrain`, or GiftEvalPretrain)"),
    arg("--validation-share", type=float, default=0.05,
        help="share of whole real series held out for validation and checkpoint choice (default: 0.05)"),
    arg("--max-series-length", type=int, default=None, help="keep the last N steps of longer real series"),
    arg("--synthetic-share", type=float, default=None,
        help="share of synthetic windows (default: 1.0 without --real-data, 0.5 with it)"),
    arg("--mixup-prob", type=float, default=0.2, help="share of TSMixup windows (default: 0.2)"),
    arg("--pool-size", type=int, default=4096, help="synthetic series kept on the device (default: 4096)"),
    arg("--val-every", type=int, default=250, help="steps between validations (default: 250)"),
    arg("--checkpoint-every", type=int, default=250, help="steps between resume checkpoints (default: 250)"),
    arg("--max-minutes", type=float, default=None,
        help="wall-clock budget of this call: stop cleanly, save, resume later with the same command"),
    arg("--seed", type=int, default=0, help="random seed (default: 0)"),
    arg("--precision", default="auto", help="Lightning precision (default: bf16-mixed on a GPU, else 32-true)"),
    arg("--accelerator", default="auto", help="Lightning accelerator: auto, cpu, gpu"),
    arg("--compile", action="store_true", help="torch.compile the model"),
)
def train_command(args: argparse.Namespace) -> int:
    """Training lives in ``pipelines`` (it needs the ``train`` extra); the CLI only parses and hands over."""
    try:
        from tsfm.pipelines.train import TrainConfig, TrainingError, train
    except ImportError as err:
        raise CommandError(f"training needs the train extra (pip install 'tsfm[train]'): {err}") from None
    import torch

    from tsfm.pipelines.data.corpus import CorpusError, load_corpus
    from tsfm.presets import preset_config

    try:
        changes = {"context_length": max(args.context_length, 2048)}
        if args.horizon_patches is not None:
            changes["train_horizon_patches"] = args.horizon_patches
        model_config = preset_config(args.backbone, args.preset, **changes)
        share = args.synthetic_share if args.synthetic_share is not None else (
            1.0 if args.real_data is None else 0.5)
        gpu = args.accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available()
        precision = args.precision if args.precision != "auto" else ("bf16-mixed" if gpu else "32-true")
        train_config = TrainConfig(
            steps=args.steps, batch_size=args.batch_size, learning_rate=args.learning_rate,
            warmup_steps=args.warmup_steps, context_length=args.context_length, mask_ratio=args.mask_ratio,
            synthetic_share=share, mixup_prob=args.mixup_prob, pool_size=args.pool_size, seed=args.seed,
            precision=precision, val_every=args.val_every, checkpoint_every=args.checkpoint_every,
            max_minutes=args.max_minutes, compile=args.compile,
        )
        real = validation = None
        description = "synthetic priors (tsfm.pipelines.data.priors)"
        if args.real_data is not None:
            real, validation = load_corpus(args.real_data, max_length=args.max_series_length,
                                           validation_share=args.validation_share)
            description += (f" + {len(real)} real series from {args.real_data} ({len(validation)} held out for "
                            "validation)")
        path = train(model_config, train_config, args.out, real=real, validation=validation,
                     data_description=description, accelerator=args.accelerator)
    except (TrainingError, CorpusError) as err:
        raise CommandError(str(err)) from None
    except ValueError as err:  # an unknown backbone or preset
        raise CommandError(str(err)) from None
    print(f"wrote {path}")
    return EXIT_OK


@command(
    "serve",
    "Run the REST forecasting service (FastAPI + uvicorn); limits and the API key come from TSFM_* variables.",
    arg("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, loopback only)"),
    arg("--port", type=int, default=8000, help="port (default: 8000)"),
    arg("--model", default=None, help="'default' (shipped with tsfm) or a checkpoint folder (default: $TSFM_MODEL "
        "or 'default')"),
    arg("--workers", type=int, default=1, help="uvicorn worker processes, each with its own model (default: 1)"),
    arg("--log-level", default="info", help="uvicorn log level: debug, info, warning, error (default: info)"),
)
def serve_command(args: argparse.Namespace) -> int:
    """The service lives in ``serving`` (it needs the ``serve`` extra); the CLI only parses and hands over."""
    try:
        from tsfm.serving.server import run
    except ImportError as err:
        raise CommandError(f"serving needs the serve extra (pip install 'tsfm[serve]'): {err}") from None
    if args.workers < 1:
        raise CommandError(f"--workers must be at least 1, got {args.workers}")
    try:
        run(host=args.host, port=args.port, model=args.model, workers=args.workers, log_level=args.log_level)
    except ValueError as err:  # a bad checkpoint (CheckpointError) or TSFM_* variable (pydantic ValidationError)
        raise CommandError(str(err)) from None
    return EXIT_OK


def _command_line() -> str | None:
    """The command as typed, for results files (None when called in-process, e.g. from tests)."""
    import shlex

    return shlex.join(["tsfm", *sys.argv[1:]]) if sys.argv and Path(sys.argv[0]).name == "tsfm" else None


@command(
    "sweep",
    "The scaling sweep: train every backbone at every preset with one recipe, score each zero-shot, append one row "
    "per configuration to OUT/results.csv; resumable run by run (finished runs are skipped).",
    arg("--backbones", default="xlstm[3:1],mamba2,gdn", help="comma-separated backbone specs"),
    arg("--presets", default="1M,3M,10M,40M,80M", help="comma-separated presets"),
    arg("--seeds", default="0", help="comma-separated seeds (default: 0)"),
    arg("--tokens", default=None,
        help="token budget per preset overriding the recipe, e.g. 1M=12e6,10M=80e6 (default: the recipe table)"),
    arg("--out", type=Path, required=True, help="sweep folder (results.csv, runs/)"),
    arg("--real-data", type=Path, default=None, help="GIFT-Eval-format root of real pretraining series"),
    arg("--benchmark", type=Path, required=True, help="benchmark root to score on (tsfm data build-benchmark)"),
    arg("--normaliser", type=Path, default=Path("reports/results/seasonal_naive/all_results.csv"),
        help="Seasonal-Naive all_results.csv that normalises the scores"),
    arg("--parallel", type=int, default=1, help="runs side by side on one device (default: 1)"),
    arg("--max-minutes", type=float, default=None, help="time budget per run in this call (resumed later)"),
    arg("--context-length", type=int, default=2048, help="training context (default: 2048)"),
    arg("--horizon-patches", type=int, default=24, help="future patches per window (default: 24)"),
    arg("--max-series-length", type=int, default=None, help="keep the last N steps of longer real series"),
)
def sweep_command(args: argparse.Namespace) -> int:
    """The runner lives in ``tsfm.pipelines.sweep``; the CLI parses, plans and hands over."""
    import dataclasses

    from tsfm.pipelines.sweep import RECIPES, SweepError, SweepSettings, plan_runs, run_sweep

    try:
        recipes = dict(RECIPES)
        for item in filter(None, (args.tokens or "").split(",")):
            preset, _, value = item.partition("=")
            if preset not in recipes or not value:
                raise SweepError(f"--tokens: expected PRESET=TOKENS with a known preset, got {item!r}")
            recipes[preset] = dataclasses.replace(recipes[preset], tokens=float(value))
        runs = plan_runs([b.strip() for b in args.backbones.split(",") if b.strip()],
                         [p.strip() for p in args.presets.split(",") if p.strip()],
                         [int(s) for s in args.seeds.split(",")])
        settings = SweepSettings(out=args.out, real_data=args.real_data, benchmark=args.benchmark,
                                 normaliser=args.normaliser, context_length=args.context_length,
                                 horizon_patches=args.horizon_patches, max_minutes=args.max_minutes,
                                 max_series_length=args.max_series_length, recipes=recipes)
        finished = run_sweep(runs, settings, parallel=args.parallel)
    except (SweepError, ValueError) as err:
        raise CommandError(str(err)) from None
    print(f"finished {len(finished)} run(s): {', '.join(finished) or '-'}; results in {args.out / 'results.csv'}")
    return EXIT_OK


@command(
    "evaluate",
    "Score models on a benchmark with GIFT-Eval's protocol; writes OUT/<model>/all_results.csv and run.json.",
    arg("--model", nargs="+", default=["default"], metavar="MODEL",
        help="'default', a checkpoint folder, or a baseline: naive, seasonal_naive, auto_ets, auto_arima, auto_theta"),
    arg("--benchmark", type=Path, required=True,
        help="benchmark root: built by `tsfm data build-benchmark`, or a GIFT-Eval download"),
    arg("--configs", nargs="+", default=None, metavar="CONFIG",
        help="result keys (m4_hourly/H/short) or dataset folders (ett1/H); default: all"),
    arg("--out", type=Path, default=None, help="results folder (default: print the summary only)"),
    arg("--batch-size", type=int, default=256, help="series per forward pass of tsfm models (default: 256)"),
    arg("--n-jobs", type=int, default=1, help="processes for the statsforecast baselines (default: 1)"),
    DEVICE_ARG,
    arg("--quiet", action="store_true", help="no progress bars"),
)
def evaluate_command(args: argparse.Namespace) -> int:
    """The protocol lives in ``tsfm.pipelines.evaluate`` (it needs the ``eval`` extra); the CLI parses and prints."""
    try:
        from tsfm.pipelines.evaluate import EvaluationError, evaluate, format_summary
    except ImportError as err:
        raise CommandError(f"evaluation needs the eval extra (pip install 'tsfm[eval]'): {err}") from None
    try:
        report = evaluate(
            args.model, args.benchmark, configs=args.configs, out=args.out, batch_size=args.batch_size,
            n_jobs=args.n_jobs, device=args.device, progress=not args.quiet, command=_command_line(),
        )
    except EvaluationError as err:
        raise CommandError(str(err)) from None
    print(format_summary(report))
    if args.out is not None:
        print(f"wrote {', '.join(str(args.out / name) for name in report)}")
    return EXIT_OK


@command(
    "report",
    "Markdown tables, normalised geometric means, win rates and plots from `tsfm evaluate` results.",
    arg("--results", nargs="+", type=Path, required=True, metavar="PATH",
        help="all_results.csv files or folders holding them (one per model)"),
    arg("--out", type=Path, default=Path("reports"), help="folder for the report and plots (default: reports)"),
    arg("--name", default="report", help="file name stem: OUT/NAME.md, OUT/NAME_*.png (default: report)"),
    arg("--benchmark", type=Path, default=None, help="benchmark root, to plot forecast examples"),
    arg("--example-models", nargs="+", default=None, metavar="MODEL",
        help="models drawn in the forecast examples (default: the best baseline and the tsfm models)"),
    arg("--title", default=None, help="report title (default: '<NAME> report')"),
    arg("--note", action="append", default=[], metavar="TEXT", help="a paragraph to add under the title (repeatable)"),
    DEVICE_ARG,
)
def report_command(args: argparse.Namespace) -> int:
    """Reports live in ``tsfm.pipelines.report``; example plots run models, so a bad model name exits 2 too."""
    try:
        from tsfm.pipelines.evaluate import EvaluationError
        from tsfm.pipelines.report import write_report
    except ImportError as err:
        raise CommandError(f"reports need the eval extra (pip install 'tsfm[eval]'): {err}") from None
    try:
        written = write_report(
            args.results, args.out, name=args.name, benchmark=args.benchmark, example_models=args.example_models,
            device=args.device, title=args.title, command=_command_line(), notes=args.note,
        )
    except EvaluationError as err:
        raise CommandError(str(err)) from None
    for path in written:
        print(f"wrote {path}")
    return EXIT_OK


@command(
    "data",
    "Build GIFT-Eval-format data: the offline zero-shot benchmark, or the real pretraining corpus (disjoint).",
    arg("action", choices=("build-benchmark", "build-pretrain"), help="what to build"),
    arg("--out", type=Path, required=True, help="output folder (created; datasets in it are replaced)"),
    arg("--shared-dir", default=None, help="shared folder holding data/raw (default: $TSFM_SHARED_DIR or ../shared)"),
    arg("--datasets", nargs="+", default=None, metavar="NAME", help="build only these datasets"),
    arg("--quiet", action="store_true", help="no progress bar"),
)
def data_command(args: argparse.Namespace) -> int:
    """The same sub-commands as ``python -m tsfm.pipelines.data``, reached through its own argparse wiring."""
    from tsfm.pipelines.data.__main__ import add_data_commands

    parser = argparse.ArgumentParser(prog="tsfm data")
    add_data_commands(parser.add_subparsers(dest="action", required=True))
    run = parser.parse_args([args.action, "--out", str(args.out)]).func
    try:
        return int(run(args))
    except (ValueError, KeyError) as err:  # unknown dataset names, unreadable sources
        raise CommandError(str(err).strip("'\"")) from None


if __name__ == "__main__":
    sys.exit(main())
