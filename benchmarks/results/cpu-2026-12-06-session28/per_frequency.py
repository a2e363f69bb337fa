"""Per-frequency, per-term and per-configuration MASE ratios of judged candidates to the judge's reference (both
spans pooled, geometric means over configuration-spans). Run from this folder:
`python per_frequency.py judge tf10-real1 tf20-scratch`. (The judge now writes the per-frequency table itself.)"""

import sys

import numpy as np
import pandas as pd

MASE = "eval_metrics/MASE[0.5]"


def read(folder: str, span: int, name: str) -> pd.Series:
    return pd.read_csv(f"{folder}/spans_back_{span}/{name}/all_results.csv").set_index("dataset")[MASE]


def geometric_mean(values: pd.Series) -> float:
    return float(np.exp(np.log(values).mean()))


folder, candidates = sys.argv[1], sys.argv[2:]
rows = []
for span in (2, 3):
    reference = read(folder, span, "reference")
    for name in candidates:
        ratio = (read(folder, span, name) / reference).dropna()
        rows += [(name, dataset, value) for dataset, value in ratio.items()]
table = pd.DataFrame(rows, columns=["model", "dataset", "ratio"])
table["frequency"] = table.dataset.str.split("/").str[1]
table["term"] = table.dataset.str.split("/").str[2]
for by in ("frequency", "term", "dataset"):
    print(table.groupby(["model", by]).ratio.apply(geometric_mean).unstack(0).round(3).to_string(), "\n")
