"""MASE relative to Seasonal Naive per span back, for each model scored under ROOT/s<span>/ by spans_probe.sh, on
the three `yosemite_temps/5T` terms (spans 2-8: never the test windows).

    .venv/bin/python benchmarks/results/cpu-2026-12-07-session39/spans_summary.py /tmp/medprobe \
        default,soup39-six,tf10-up5a2
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from tsfm.pipelines.evaluate import MASE, read_results

CONFIGS = ["yosemite_temps/5T/short", "yosemite_temps/5T/medium", "yosemite_temps/5T/long"]


def ratio(span: Path, model: str, config: str) -> float:
    """The model's MASE over Seasonal Naive's on one configuration and span (NaN where it was not scored)."""
    try:
        scored = read_results(span / model).set_index("dataset")
    except FileNotFoundError:
        return float("nan")
    naive = read_results(span / "seasonal_naive").set_index("dataset")
    return float(scored.loc[config, MASE] / naive.loc[config, MASE])


def main() -> None:
    root, models = Path(sys.argv[1]), sys.argv[2].split(",")
    spans = sorted(root.glob("s*"), key=lambda path: int(path.name[1:]))
    print("spans back:", " ".join(path.name[1:] for path in spans))
    for config in CONFIGS:
        print(config)
        for model in models:
            ratios = np.array([ratio(span, model, config) for span in spans])
            mean = np.exp(np.nanmean(np.log(ratios)))
            print(f"  {model:14s}", " ".join(f"{r:.3f}" for r in ratios),
                  f"gmean {mean:.3f} below {int((ratios < 1).sum())}/{len(ratios)}")


if __name__ == "__main__":
    main()
