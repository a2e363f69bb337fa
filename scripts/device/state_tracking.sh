#!/usr/bin/env bash
# One GPU-machine call of the state-tracking suite (issue 13): train the grid 6 tasks x 7 backbones x 3 seeds
# (126 small models, d=64, 2 blocks, 2 heads) side by side on one H200, then write the report. A bare copy of the
# repo, no install, no carry: the image's python3 has torch 2.11, Triton 3.6, pandas, matplotlib and tqdm.
#
#   bash scripts/device/state_tracking.sh                  # STEPS=800 PARALLEL=8 MINUTES=7.5 SEEDS=0,1,2
#   STEPS=2000 MINUTES=9 bash scripts/device/state_tracking.sh --tasks parity,s3   # extra flags go to `run`
#
# Budget, estimated without a GPU (numbers from the CPU of the development machine, one core):
#   - Host time of one training step of the grid's model at negligible compute (batch 2, length 2), i.e. the cost
#     of dispatching its ~830-1,600 aten ops per step: 8 ms (transformer) to 26 ms (gdn[neg_eigval]), 17 ms on
#     average. At batch 64 x length 128 an H200 does the arithmetic in well under a millisecond, so a step there
#     is launch-bound: about 10 ms per process on a faster host core, ~2-3 ms of it GPU time (hundreds of tiny
#     kernels). 8 processes side by side (16 cores) then share one GPU that is busy most of the time:
#     ~300 steps/s for the whole grid (between the 400/s GPU bound and ~250/s for time-slicing losses).
#   - 7.5 min minus ~1 min of start-up and Triton compilation leaves ~390 s: 390 s x 300 steps/s / 126 models
#     ~ 930 steps per model, plus evaluation (256 sequences at 128, 512 and 2,048 tokens: a few forwards, < 2 s).
#     STEPS=800 keeps a margin of ~15%; at the default peak learning rate 3e-3 a CPU run of xlstm[1:1] learns
#     parity in 800 steps (1.000 at 128 and 512; at 1e-3 it stays at 0.54).
#   - If it runs slower, --max-minutes stops the grid in time: cells go seed-major (all of seed 0 first), rows
#     are written per model, and a second call with the same STEPS trains only what is missing (results stay in
#     runs/state_tracking on a warm machine; carry that folder to a fresh one).
#
# Outputs under $OUT: state_tracking/ (results.csv, runs.jsonl with the commands, one PNG per task) and
# state_tracking.md. To commit: copy $OUT/state_tracking to reports/state_tracking and re-write the report there,
#   python3 -m tsfm.pipelines.state_tracking report --results reports/state_tracking --out reports/state_tracking.md
set -uo pipefail
export PYTHONUNBUFFERED=1
STEPS=${STEPS:-800}; PARALLEL=${PARALLEL:-8}; MINUTES=${MINUTES:-7.5}; SEEDS=${SEEDS:-0,1,2}
RESULTS=${RESULTS:-runs/state_tracking}
mkdir -p "$RESULTS" "$OUT/state_tracking"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
started=$(date +%s)
python3 -m tsfm.pipelines.state_tracking run --steps "$STEPS" --seeds "$SEEDS" --parallel "$PARALLEL" \
    --max-minutes "$MINUTES" --out "$RESULTS" --quiet "$@"
echo "grid call: $(( $(date +%s) - started )) s"
cp "$RESULTS"/results.csv "$RESULTS"/runs.jsonl "$OUT/state_tracking/" || exit 1
python3 -m tsfm.pipelines.state_tracking report --results "$OUT/state_tracking" --out "$OUT/state_tracking.md" \
    || exit 1
sed -n '/^## Normalised accuracy/,/^## Raw accuracy/p;/^## Comparison/,/^## Commands/p' "$OUT/state_tracking.md"
