#!/usr/bin/env bash
# One GPU-machine call that trains several pretraining runs side by side (small models do not fill an H200 alone),
# then evaluates each on the carried benchmark, and packs results into $OUT. A run folder left by an earlier call on
# this warm machine is resumed (same arguments), so a later call can continue one of them with pretrain.sh.
#
#   MINUTES=6 STEPS=10000 bash scripts/device/pretrain_many.sh runs.txt -- --preset 10M --batch-size 1024 ...
#
# runs.txt: one run per line, "NAME extra tsfm-train arguments" (arguments after -- are shared by every run).
# Runs spread over chained calls: the same STEPS in every call (the schedule), EVAL=0 on all but the last call (no
# benchmark, patterns or validation). VALIDATE_AGAINST="default ..." (last call): validation loss of those checkpoints
# and every run on the same held-out windows, on this GPU (scripts/validation_loss.py, split common).
# Carry: .whl (wheels), data/device (capped corpus + benchmark from scripts/cap_corpus.py), or .carry holding them
# gzipped (scripts/device/pack_carry.sh data/device runs/NAME/model: more fits under the 64 MiB limit).
# WEIGHTS=0: the exported weights stay on the machine (a call of a schedule that goes on in a later session brings
# back its packed state instead, scripts/device/long_run.sh, and a call returns at most 8 files).
set -uo pipefail
source scripts/device/setup.sh  # unpack .carry, install the carried wheels, PYTHONPATH
MINUTES=${MINUTES:?set MINUTES}; STEPS=${STEPS:?set STEPS}
RUNS_FILE=$1; shift; [ "${1:-}" = "--" ] && shift
mkdir -p "$OUT/pack"
names=()
while read -r name extra; do
    [ -z "$name" ] && continue
    names+=("$name")
    set -f  # split, but never glob: a spec such as xlstm[3:1,conv] is a bracket pattern to the shell
    # shellcheck disable=SC2086  # the extra arguments are meant to split
    python3 -m tsfm train --steps "$STEPS" --max-minutes "$MINUTES" --real-data data/device/pretrain \
        --out "runs/$name" "$@" $extra > "runs_$name.log" 2>&1 &
    set +f
done < "$RUNS_FILE"
wait
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
for name in "${names[@]}"; do
    grep -v -E "it/s\]|s/it\]|Warning|warn" "runs_$name.log" | tail -3
    python3 scripts/device/summarise_run.py "runs/$name"
done
if [ "${EVAL:-1}" = 1 ] && [ -n "${VALIDATE_AGAINST:-}" ]; then
    models=(); for name in "${names[@]}"; do models+=("runs/$name/model"); done
    # shellcheck disable=SC2086  # a list of checkpoints
    timeout 400 python3 scripts/validation_loss.py $VALIDATE_AGAINST "${models[@]}" --real-data data/device/pretrain \
        --validation-split common --breakdown --out "$OUT/pack/validation.json" 2>&1 | grep -v -i warn | tail -24
fi
# each model scored with both decodings, then on textbook patterns (tsfm/pipelines/patterns.py); models side by side
[ "${EVAL:-1}" = 1 ] && for name in "${names[@]}"; do
    (
        for decoding in autoregressive masked; do
            timeout "${EVAL_SECONDS:-120}" python3 scripts/eval_checkpoints.py "runs/$name/model" \
                --names "$name-$decoding" --decoding "$decoding" --benchmark data/device/benchmark \
                --out "$OUT/pack/eval_$name" --device cuda 2>&1 | grep -v -i warn | tail -1
        done
        timeout 90 python3 -m tsfm patterns --model "runs/$name/model" --out "$OUT/pack/patterns_$name" --device cuda \
            > /dev/null 2>&1
    ) > "eval_$name.log" 2>&1 &
done
wait
for name in "${names[@]}"; do
    [ -f "eval_$name.log" ] && cat "eval_$name.log"
    grep -E "^\| (sine|two seasons) \| (96|288) " "$OUT/pack/patterns_$name/patterns.md" 2>/dev/null
    if [ "${WEIGHTS:-1}" = 1 ]; then
        mkdir -p "$OUT/$name"
        cp runs/"$name"/model/*.safetensors "$OUT/$name/"
    fi
    mkdir -p "$OUT/pack/$name"
    cp runs/"$name"/model/config.json runs/"$name"/provenance.json runs/"$name"/loss.png "$OUT/pack/$name/"
    for f in runs/"$name"/logs/version_*/metrics.csv; do
        cp "$f" "$OUT/pack/$name/metrics_$(basename "$(dirname "$f")").csv"
    done
done
# one archive per runs file, so two pretrain_many.sh in one call do not overwrite each other's
tar czf "$OUT/pack-$(basename "$RUNS_FILE" .txt).tgz" -C "$OUT" pack && rm -rf "$OUT/pack"
ls -laR "$OUT" | grep safetensors || true
