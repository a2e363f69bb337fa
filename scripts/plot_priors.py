"""Draw a grid of samples of every synthetic prior family to ``reports/priors/<name>.png``.

    python scripts/plot_priors.py [--out reports/priors] [--length 2304] [--seed 0]

One picture per family (``tsfm.pipelines.data.priors.PRIORS``), 12 series each at the pretraining series length,
plus ``mix.png`` with samples of ``DEFAULT_PRIOR_MIX``; left-padded NaN shows as empty space on the left.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

from tsfm.pipelines.data.priors import PRIORS, sample_priors

ROWS, COLS = 4, 3


def plot_grid(series: torch.Tensor, title: str, path: Path) -> None:
    """Save ``series [ROWS * COLS, L]`` as a grid of small line plots titled ``title``."""
    fig, axes = plt.subplots(ROWS, COLS, figsize=(12, 8), sharex=True)
    for ax, row in zip(axes.flat, series.numpy(), strict=True):
        ax.plot(row, linewidth=0.6)
        ax.tick_params(labelsize=6)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("reports/priors"))
    parser.add_argument("--length", type=int, default=2304)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, prior in PRIORS.items():
        series = prior(ROWS * COLS, args.length, torch.Generator().manual_seed(args.seed))
        plot_grid(series, f"{name} ({args.length} steps, seed {args.seed})", args.out / f"{name}.png")
        print(f"wrote {args.out / f'{name}.png'}")
    mixed = sample_priors(ROWS * COLS, args.length, torch.Generator().manual_seed(args.seed))
    plot_grid(mixed, f"DEFAULT_PRIOR_MIX ({args.length} steps, seed {args.seed})", args.out / "mix.png")
    print(f"wrote {args.out / 'mix.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
