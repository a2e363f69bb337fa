# The 5-minute terms of the default and two upsampled candidates, scored with their shipped inference over spans
# 2-8 (never the test windows), beside Seasonal Naive on the same windows. From /work/main:
#   bash benchmarks/results/cpu-2026-12-07-session39/spans_probe.sh       (~4 minutes; writes /tmp/medprobe)
#   .venv/bin/python benchmarks/results/cpu-2026-12-07-session39/spans_summary.py /tmp/medprobe \
#       default,soup39-six,tf10-up5a2 > benchmarks/results/cpu-2026-12-07-session39/spans_probe.txt
set -euo pipefail
for s in 2 3 4 5 6 7 8; do
  o=/tmp/medprobe/s$s
  common=(--benchmark data/benchmark --out "$o" --spans-back "$s" --device cpu
          --configs yosemite_temps/5T/medium yosemite_temps/5T/short yosemite_temps/5T/long)
  PYTHONPATH=.:scripts .venv/bin/python scripts/eval_checkpoints.py seasonal_naive "${common[@]}" > /dev/null 2>&1
  PYTHONPATH=.:scripts .venv/bin/python scripts/eval_checkpoints.py default runs/soup39-six/model \
      runs/tf10-up5a2/model --names default soup39-six tf10-up5a2 \
      --normaliser "$o/seasonal_naive/all_results.csv" "${common[@]}" > /dev/null 2>&1
done
