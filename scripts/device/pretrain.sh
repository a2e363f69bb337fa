#!/usr/bin/env bash
# One GPU-machine call of a pretraining run: install the carried wheels (gluonts and its pydantic, for evaluation),
# optionally time the data path and the training step, train (resuming runs/$RUN if an earlier call on this warm
# machine left it), evaluate the exported model on the carried benchmark and on textbook patterns, and pack
# results into $OUT.
#
#   RUN=default-10m MINUTES=6.5 STEPS=6000 BENCH=1 BENCH_STEP=1 EVAL_SECONDS=240 bash scripts/device/pretrain.sh --backbone 'xlstm[3:1]' --preset 10M ...
#
# A run spread over chained calls (each issued at once, so the machine is still warm) whose step count should fill
# TOTAL_MINUTES of training: STEPS=auto with BENCH_STEP=1 times the step of BENCH_SPEC at BENCH_PRESET and
# BENCH_BATCH (compiled if the run is), and plans 0.75 x TOTAL_MINUTES / step time steps, kept in
# runs/$RUN/planned_steps so the later calls resume with the same schedule. EVAL=0 skips the benchmark and patterns
# (calls before the last).
#
# VALIDATE_AGAINST="default" (with EVAL=1) also scores the validation loss of the run beside those checkpoints.
#
# Carry: .whl (wheels), data/device (capped corpus + benchmark from scripts/cap_corpus.py), or .carry holding them
# gzipped (scripts/device/pack_carry.sh). Everything after the variables is passed to `tsfm train`.
set -uo pipefail
source scripts/device/setup.sh  # unpack .carry, install the carried wheels, PYTHONPATH
RUN=${RUN:?set RUN}; MINUTES=${MINUTES:?set MINUTES}; STEPS=${STEPS:?set STEPS (a number, or auto)}
mkdir -p "$OUT/pack"
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm --format=csv,noheader
if [ "${BENCH:-0}" = 1 ]; then  # the data path alone, then the training step eager and compiled
    timeout 120 python3 -m benchmarks.data_path --real data/device/pretrain --out "$OUT/pack" 2>&1 | tail -16
fi
compiled=0  # the run trains under torch.compile (mamba2 and gdn do not compile in Inductor here: RESULTS.md)
for arg in "$@"; do [ "$arg" = --compile ] && compiled=1; done
if [ "${BENCH_STEP:-0}" = 1 ] && [ ! -f "runs/$RUN/planned_steps" ]; then
    bench_compile=(); { [ "$compiled" = 1 ] || [ "${COMPILE:-}" = auto ]; } && bench_compile=(--compile)
    timeout 180 python3 -m benchmarks.train_gpu --specs "${BENCH_SPEC:-xlstm[3:1]}" --presets "${BENCH_PRESET:-10M}" \
        --batch-size "${BENCH_BATCH:-1024}" --steps 10 "${bench_compile[@]}" --out "$OUT/pack" 2>&1 | tail -6
    # COMPILE=auto: train compiled only if the timing above shows it at least 15% faster (the decision is printed)
    if [ "${COMPILE:-}" = auto ] && python3 - "$OUT/pack/train_gpu.jsonl" <<'PY'
import json, sys
rows = {r["ops"]: r for r in map(json.loads, open(sys.argv[1])) if "error" not in r}
eager, compiled = rows.get("triton"), rows.get("triton + compile")
ok = bool(eager and compiled and compiled["ms_per_step"] < 0.85 * eager["ms_per_step"])
print(f"compile decision: {'on' if ok else 'off'} (eager {eager and eager['ms_per_step']:.1f} ms, "
      f"compiled {compiled and compiled['ms_per_step']:.1f} ms)" if eager and compiled else "compile decision: off")
sys.exit(0 if ok else 1)
PY
    then set -- "$@" --compile; compiled=1; fi
fi
if [ "$STEPS" = auto ]; then  # planned once, from the step time above (as the run trains); resumed calls reuse it
    if [ ! -f "runs/$RUN/planned_steps" ]; then
        mkdir -p "runs/$RUN"
        python3 - "$OUT/pack/train_gpu.jsonl" "${TOTAL_MINUTES:?STEPS=auto needs TOTAL_MINUTES}" "$compiled" \
            > "runs/$RUN/planned_steps" <<'PY' \
            || { rm -f "runs/$RUN/planned_steps"; echo "STEPS=auto: no step time (BENCH_STEP=1?)"; exit 1; }
import json, sys
ops = "triton + compile" if sys.argv[3] == "1" else "triton"
rows = [r for r in map(json.loads, open(sys.argv[1])) if "error" not in r and r["ops"] == ops]
# `tsfm train` (data path, validation, checkpoints) kept ~0.8 of the benchmark's step rate (8,991 vs 11.2k windows/s)
print(int(0.75 * float(sys.argv[2]) * 60_000 / rows[0]["ms_per_step"]))
PY
    fi
    STEPS=$(cat "runs/$RUN/planned_steps")
    echo "planned steps: $STEPS (runs/$RUN/planned_steps)"
fi
[ -f "runs/$RUN/checkpoints/last.ckpt" ] && echo "resuming runs/$RUN" || echo "new run runs/$RUN"
python3 -m tsfm train --steps "$STEPS" --max-minutes "$MINUTES" --real-data data/device/pretrain --out "runs/$RUN" \
    "$@" 2>&1 | grep -v -E "it/s\]|s/it\]|Warning|warn" | tail -25
python3 scripts/device/summarise_run.py "runs/$RUN"
if [ "${EVAL:-1}" = 1 ]; then
    # DECODINGS="masked autoregressive" scores each (EVAL_SECONDS each); the default is the checkpoint's own
    for decoding in ${DECODINGS:-own}; do
        choice=(--names "$RUN"); [ "$decoding" = own ] || choice=(--names "$RUN-$decoding" --decoding "$decoding")
        timeout "${EVAL_SECONDS:-240}" python3 scripts/eval_checkpoints.py "runs/$RUN/model" "${choice[@]}" \
            --benchmark data/device/benchmark --out "$OUT/pack/eval" --device cuda 2>&1 | grep -v -i warn | tail -5
    done
    # VALIDATE_AGAINST="default ...": validation loss of these checkpoints and the run on the same held-out windows
    # (the first one's settings, the split both hold out), bf16 on this GPU, so the run can be chosen by the rule
    # before the weights leave the machine (scripts/validation_loss.py; a CPU rerun takes 20 minutes per model)
    if [ -n "${VALIDATE_AGAINST:-}" ]; then
        # shellcheck disable=SC2086  # a list of checkpoints
        timeout 300 python3 scripts/validation_loss.py $VALIDATE_AGAINST "runs/$RUN/model" --real-data \
            data/device/pretrain --validation-split common --breakdown --out "$OUT/pack/validation.json" 2>&1 \
            | grep -v -i warn | tail -22
    fi
    # textbook patterns (seconds): does the model continue a sine, a sawtooth, two seasons? (tsfm/pipelines/patterns.py)
    timeout 120 python3 -m tsfm patterns --model "runs/$RUN/model" --out "$OUT/pack/patterns" --device cuda 2>&1 \
        | grep -E "^\| (sine|two seasons) " | head -16
fi
cp runs/"$RUN"/model/*.safetensors "$OUT/"
cp runs/"$RUN"/model/config.json runs/"$RUN"/provenance.json runs/"$RUN"/loss.png "$OUT/pack/" 2>/dev/null
for f in runs/"$RUN"/logs/version_*/metrics.csv; do cp "$f" "$OUT/pack/metrics_$(basename "$(dirname "$f")").csv"; done
tar czf "$OUT/pack.tgz" -C "$OUT" pack && rm -rf "$OUT/pack"
ls -la "$OUT"
