"""The ``tsfm`` command line: one subcommand per function, registered with ``@command``.

This module owns the machinery and the core commands (``forecast``, ``info``). The packages above the core own
theirs (``tsfm.pipelines.cli``: train, sweep, evaluate, report, data; ``tsfm.serving.cli``: serve) and are found
through the ``tsfm.commands`` entry-point group, so the core imports nothing above it. Where the package is not
installed (``python -m tsfm`` from a bare copy of the tree, as on the GPU machine) there are no entry points and
the fixed list :data:`KNOWN_COMMAND_MODULES` stands in.

Adding a command is one decorated function: its arguments are declared in the decorator and it returns an exit
code. ``main`` turns input errors (``ForecastInputError``, ``CommandError``, unreadable files) into one line
``error: ...`` on stderr and exit code 2, without a traceback; anything else is a bug and keeps its traceback.
Heavy modules (torch, pandas, matplotlib) are imported inside the commands so that ``tsfm --help`` is instant.
"""

from __future__ import annotations

import argparse
import csv
import functools
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tsfm.config import NAIVE_BLENDS

EXIT_OK = 0
EXIT_USAGE = 2  # bad input, as argparse uses for bad arguments

TABLE_ROWS_PER_SERIES = 3
TABLE_MAX_SERIES = 5
DATA_SUFFIXES = (".csv", ".parquet", ".pq")
CSV_SNIFF_BYTES = 65536
PACKAGE_DIR = Path(__file__).resolve().parent


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
COMMAND_GROUPS: list[Callable[[Any], None]] = []
"""Commands with sub-actions, added by :func:`command_group` (see :func:`build_parser`)."""

ENTRY_POINT_GROUP = "tsfm.commands"
# Modules that register commands, tried when no entry point of the group is installed (a bare copy of the tree).
KNOWN_COMMAND_MODULES = ("tsfm.pipelines.cli", "tsfm.serving.cli")


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


def command_group(add: Callable[[Any], None]) -> Callable[[Any], None]:
    """Register ``add(subparsers)``, which adds a command with its own actions (e.g. ``tsfm tasks run|report``)."""
    COMMAND_GROUPS.append(add)
    return add


def command_modules() -> list[str]:
    """The modules that register sub-commands: the ``tsfm.commands`` entry points, else the known list."""
    from importlib.metadata import entry_points

    names = [entry.module for entry in entry_points(group=ENTRY_POINT_GROUP)]
    return names or list(KNOWN_COMMAND_MODULES)


def load_commands() -> dict[str, Command]:
    """Import every command module (each registers its commands on import) and return all commands.

    A module that is not there (a distribution built without it) is left out; any other import error is a bug and
    propagates. Commands never import their heavy dependencies at module level, so this stays fast.
    """
    import importlib

    for name in command_modules():
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name is None or not name.startswith(err.name):
                raise
    return COMMANDS


def build_parser() -> argparse.ArgumentParser:
    """The parser with every registered command as a subcommand."""
    from tsfm import __version__

    load_commands()

    description = "Time-series foundation models: forecast, inspect, train, evaluate, serve."
    parser = argparse.ArgumentParser(prog="tsfm", description=description)
    parser.add_argument("--version", action="version", version=f"tsfm {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for cmd in COMMANDS.values():
        sub = subparsers.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        for argument in cmd.arguments:
            sub.add_argument(*argument.flags, **argument.options)
        sub.set_defaults(run=cmd.run)
    for add_group in COMMAND_GROUPS:
        add_group(subparsers)
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
        with warnings.catch_warnings():
            warnings.showwarning = functools.partial(_show_warning, fallback=warnings.showwarning)
            return args.run(args)
    except _user_errors() as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE


def _show_warning(message, category, filename, lineno, file=None, line=None, *, fallback: Callable) -> None:
    """tsfm's own warnings (a horizon past the trained one, a freq finer than the data) are said to the user as
    ``warning: ...`` lines, without the source line Python would print; other libraries' go to ``fallback``."""
    if issubclass(category, UserWarning) and Path(filename).resolve().is_relative_to(PACKAGE_DIR):
        print(f"warning: {message}", file=file or sys.stderr)
    else:
        fallback(message, category, filename, lineno, file, line)


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


def split_specs(text: str) -> list[str]:
    """Comma-separated backbone specs, keeping the commas inside brackets: ``"xlstm[1:0,conv],gdn"`` ->
    ``["xlstm[1:0,conv]", "gdn"]``; items are stripped and empty ones dropped. Only the split happens here (no
    torch import, so argparse may call it); the specs are checked where the backbones are built."""
    items, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            items.append(text[start:index])
            start = index + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


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
    """Read a CSV or Parquet file into a DataFrame; a CSV's delimiter (``,`` ``;`` tab or ``|``) is detected from its
    first lines, as spreadsheets in many locales write ``;``."""
    import pandas as pd

    suffix = path.suffix.lower()
    if suffix not in DATA_SUFFIXES:
        raise CommandError(f"{path}: unsupported file type {suffix or '(none)'!r}; use .csv or .parquet")
    if not path.is_file():
        raise CommandError(f"{path}: no such file")
    try:
        return pd.read_csv(path, sep=_csv_delimiter(path)) if suffix == ".csv" else pd.read_parquet(path)
    except (ValueError, OSError, pd.errors.ParserError) as err:
        raise CommandError(f"{path}: cannot read it as {suffix[1:]}: {err}") from None


def _csv_delimiter(path: Path) -> str:
    """The delimiter ``csv.Sniffer`` finds in the file's first 64 KiB among ``,;\\t|``; ``,`` when it finds none."""
    with path.open(newline="", errors="replace") as handle:
        sample = handle.read(CSV_SNIFF_BYTES)
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:
        return ","


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
    arg("data", type=Path, help="input .csv (delimiter , ; tab or | detected) or .parquet with id, timestamp and "
                                "target columns"),
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
    arg("--allow-negative", action="store_true",
        help="keep negative forecasts of series whose history has no negative value (the default model sets them "
             "to 0: ModelConfig.infer_nonnegative)"),
    arg("--naive-blend", choices=NAIVE_BLENDS, default=None,
        help="move forecasts towards Seasonal Naive by how the two forecast each series' last steps (off: the "
             "model's own forecast; default: the model's ModelConfig.naive_blend, inverse_mse for the default)"),
    arg("--flip-equivariant", action=argparse.BooleanOptionalAction, default=None,
        help="average each forecast with the upside-down series' forecast turned back (twice the compute; default: "
             "the model's ModelConfig.flip_equivariant, on for the default); --no-flip-equivariant forecasts once"),
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
        infer_nonnegative=False if args.allow_negative else None,
        naive_blend=args.naive_blend,
        flip_equivariant=args.flip_equivariant,
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
    from tsfm.model import num_parameters

    rows: list[tuple[str, Any]] = [
        ("backbone", model.config.backbone),
        ("parameters", f"{num_parameters(model):,}"),
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


if __name__ == "__main__":
    sys.exit(main())
