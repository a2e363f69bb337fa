"""``python -m tsfm.pipelines.data build-benchmark --out DIR`` / ``build-pretrain --out DIR``.

The argparse wiring lives in :func:`add_data_commands` so the ``tsfm data ...`` CLI can mount the same
sub-commands; :func:`main` is the stand-alone entry point.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

__all__ = ["add_data_commands", "main"]


def _build_benchmark(args: argparse.Namespace) -> int:
    from .build import build_benchmark, read_benchmark

    tic = time.perf_counter()
    keys = build_benchmark(args.out, shared_dir=args.shared_dir, progress=not args.quiet, datasets=args.datasets)
    configs = {c["key"]: c for c in read_benchmark(args.out)}
    print(f"{'configuration':34s} {'freq':>6s} {'series':>7s} {'var':>4s} {'pl':>5s} {'win':>4s}")
    for key in keys:
        c = configs[key]
        print(
            f"{key:34s} {c['freq']:>6s} {c['num_series']:>7d} {c['num_variates']:>4d} "
            f"{c['prediction_length']:>5d} {c['windows']:>4d}"
        )
    print(f"{len(keys)} configurations written to {args.out} in {time.perf_counter() - tic:.1f} s")
    return 0


def _build_pretrain(args: argparse.Namespace) -> int:
    from .build import build_pretrain

    tic = time.perf_counter()
    names = build_pretrain(args.out, shared_dir=args.shared_dir, progress=not args.quiet, datasets=args.datasets)
    print(f"{len(names)} pretraining datasets written to {args.out} in {time.perf_counter() - tic:.1f} s")
    return 0


def add_data_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add ``build-benchmark`` and ``build-pretrain`` to an argparse sub-parser set; each sets ``func(args)``."""
    for name, func, what in (
        ("build-benchmark", _build_benchmark, "the offline zero-shot benchmark (GIFT-Eval format)"),
        ("build-pretrain", _build_pretrain, "the real-data pretraining corpus (disjoint from the benchmark)"),
    ):
        p = subparsers.add_parser(name, help=f"convert raw sources into {what}", description=f"Build {what}.")
        p.add_argument("--out", required=True, help="output folder (created; datasets in it are replaced)")
        p.add_argument(
            "--shared-dir",
            default=None,
            help="shared folder holding data/raw (default: $TSFM_SHARED_DIR, else ../shared of the current folder)",
        )
        p.add_argument("--raw", default=None, help="folder holding the raw files (default: <shared>/data/raw)")
        p.add_argument("--datasets", nargs="+", default=None, metavar="NAME", help="build only these datasets")
        p.add_argument("--quiet", action="store_true", help="no progress bar")
        p.set_defaults(func=func)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tsfm.pipelines.data", description="tsfm data preparation")
    add_data_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    from .paths import use_raw_dir

    with use_raw_dir(args.raw):
        return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
