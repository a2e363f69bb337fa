"""The new default against the one it replaced on the benchmark's test windows, read once after the decision.

    PYTHONPATH=. python benchmarks/results/cpu-2026-12-07-session43/test_windows/paired_test_windows.py \
        OLD.csv NEW.csv SN.csv

OLD.csv: the replaced default's ``reports/results/tsfm-default/all_results.csv`` (``git show 92583e4:...``); NEW.csv:
the same file after ``python -m tsfm evaluate --model default``; SN.csv: Seasonal Naive's.
"""

import sys

import numpy as np
import pandas as pd

from tsfm.pipelines.evaluate import normalise, paired_ratio_interval, read_results

old, new, sn = (read_results(p) for p in sys.argv[1:4])
frame = pd.concat([normalise(old.assign(model="before"), sn), normalise(new.assign(model="after"), sn)])
wide = frame.pivot_table(index="dataset", columns="model", values=["MASE", "CRPS"])
for metric in ("MASE", "CRPS"):
    ratio, low, high = paired_ratio_interval(wide[(metric, "after")], wide[(metric, "before")])
    lower = int((wide[(metric, "after")] < wide[(metric, "before")]).sum())
    print(f"{metric}: paired ratio {ratio:.4f} [{low:.4f}, {high:.4f}], lower on {lower} of {len(wide)}")
change = (wide[("MASE", "after")] / wide[("MASE", "before")]).rename("MASE after / before")
table = pd.DataFrame({"before": wide[("MASE", "before")], "after": wide[("MASE", "after")], "ratio": change})
print(table.sort_values("ratio").round(3).to_string())
print("above Seasonal Naive after:", ", ".join(f"{k} ({v:.3f})" for k, v in wide[("MASE", "after")].items() if v >= 1))
means = {m: round(float(np.exp(np.log(wide[(m, "after")]).mean())), 3) for m in ("MASE", "CRPS")}
print("geometric means after:", means)
