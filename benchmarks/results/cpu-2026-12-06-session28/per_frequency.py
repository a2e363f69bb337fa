"""Per-frequency and per-term MASE ratios of the judged candidates to the judge's reference (both spans pooled,
geometric means over configuration-spans). Run from this folder: `python per_frequency.py judge tf10-real1 tf20-scratch`."""

import sys

import numpy as np
import pandas as pd

folder, candidates = sys.argv[1], sys.argv[2:]
rows = []
for span in (2, 3):
    read = lambda name: pd.read_csv(f"{folder}/spans_back_{span}/{name}/all_results.csv").set_index("dataset")  # noqa: E731
    reference = read("reference")["eval_metrics/MASE[0.5]"]
    for name in candidates:
        ratio = (read(name)["eval_metrics/MASE[0.5]"] / reference).dropna()
        rows += [(name, dataset, value) for dataset, value in ratio.items()]
table = pd.DataFrame(rows, columns=["model", "dataset", "ratio"])
table["frequency"] = table.dataset.str.split("/").str[1]
table["term"] = table.dataset.str.split("/").str[2]
geometric_mean = lambda x: float(np.exp(np.log(x).mean()))  # noqa: E731
for by in ("frequency", "term", "dataset"):
    print(table.groupby(["model", by]).ratio.apply(geometric_mean).unstack(0).round(3).to_string(), "\n")
