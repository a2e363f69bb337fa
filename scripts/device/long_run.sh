#!/usr/bin/env bash
# One call of a pretraining schedule that outlives a session (issue 11: the 20M Transformer's 30,000 steps). The run
# (the first line of RUNS_FILE) resumes from this warm machine's runs/NAME, or else from its packed state
# (`tsfm pack-run`) carried in STATE_DIR; it trains MINUTES more (pretrain_many.sh, EVAL=0, WEIGHTS=0), and its state
# is packed into $OUT/state: manifest.json and state.pt in meta.tgz, and as many shards as keep the call's files under
# the 64 MiB (and 8 files) one call brings back; a 20M state (77 MiB) needs a second call, SEND_REST=1, that brings
# back the shards left (no training; the warm machine still holds them).
#
#   MINUTES=8.6 STEPS=30000 bash scripts/device/long_run.sh scripts/device/runs/tf20-long.txt -- ARGS
#   STATE_DIR=runs/tf20-long-state MINUTES=... bash scripts/device/long_run.sh ...   (a later session)
#
# A state larger than one call's 64 MiB carry (20M: about 77 MiB) crosses in two chained calls on one warm machine,
# each carrying some of the pack's files: GATHER_ONLY=1 copies them into runs/NAME-gathered (a warm machine keeps
# runs/ between calls) and stops; the next call adds the rest, and the pack is unpacked once whole (unpack-run
# refuses a pack with a missing file, naming it).
#
#   STATE_DIR=runs/tf20-long-state-a GATHER_ONLY=1 bash scripts/device/long_run.sh RUNS_FILE      (call 1)
#   STATE_DIR=runs/tf20-long-state-b MINUTES=8 STEPS=30000 bash scripts/device/long_run.sh RUNS_FILE -- ARGS
#   SEND_REST=1 bash scripts/device/long_run.sh RUNS_FILE                      (the shards the last call left behind)
#   WEIGHTS=1 ...: also bring back the exported weights (the schedule's last call); the state's shards then wait for
#   SEND_REST=1 calls
set -uo pipefail
RUNS_FILE=$1; shift; [ "${1:-}" = "--" ] && shift
name=$(awk 'NF {print $1; exit}' "$RUNS_FILE")
run=runs/$name
packed=$run-packed
[ "${WEIGHTS:-0}" = 1 ] && SEND_MIB=0  # the exported weights (38.5 MiB at 20M) fill this call's 64 MiB
send_budget=$(( ${SEND_MIB:-60} * 2**20 ))  # bytes of shards one call brings back beside the logs' archive and meta.tgz
mkdir -p "$OUT/state"
# Copies the named shards of the pack into $OUT/state while they fit send_budget; the rest are listed in unsent.txt
send_shards() {
    local sent=0 shard size left=()
    for shard in "$@"; do
        size=$(stat -c %s "$packed/$shard")
        if [ $((sent + size)) -le "$send_budget" ]; then
            cp "$packed/$shard" "$OUT/state/"; sent=$((sent + size))
        else
            left+=("$shard")
        fi
    done
    printf '%s\n' "${left[@]}" | sed '/^$/d' > "$packed/unsent.txt"
    md5sum "$packed"/*
    [ -s "$packed/unsent.txt" ] && echo "left for a SEND_REST=1 call: $(tr '\n' ' ' < "$packed/unsent.txt")"
    return 0
}
if [ "${SEND_REST:-0}" = 1 ]; then
    [ -s "$packed/unsent.txt" ] || { echo "error: nothing left to send in $packed (unsent.txt empty or missing)" >&2; exit 1; }
    mapfile -t rest < "$packed/unsent.txt"
    send_shards "${rest[@]}"
    exit 0
fi
source scripts/device/setup.sh
gathered=runs/$name-gathered
if [ -n "${STATE_DIR:-}" ] && [ ! -f "$run/checkpoints/last.ckpt" ]; then
    mkdir -p "$gathered"
    cp "$STATE_DIR"/* "$gathered/" || exit 1
    if [ -f "$gathered/meta.tgz" ]; then tar xzf "$gathered/meta.tgz" -C "$gathered" && rm "$gathered/meta.tgz"; fi
    ls -la "$gathered"
    [ "${GATHER_ONLY:-0}" = 1 ] && exit 0
    python3 -m tsfm unpack-run "$gathered" "$run" || exit 1
fi
# GPU use over the call, summarised at the end: says whether one run alone is held back by the host
nvidia-smi dmon -s u -d 5 > gpu_use.log 2>/dev/null &
dmon=$!
WEIGHTS=${WEIGHTS:-0} EVAL=0 bash scripts/device/pretrain_many.sh "$RUNS_FILE" -- "$@"
kill "$dmon" 2>/dev/null
awk -f scripts/device/gpu_use.awk gpu_use.log
if [ -f "$run/profile.md" ]; then  # tsfm train --profile-steps wrote one this call; a later call must not resend it
    mv "$run/profile.md" "$OUT/" && sed -n '1,12p' "$OUT/profile.md"
fi
rm -rf "$packed"
python3 -m tsfm pack-run "$run" "$packed" --max-shard-mib "${SHARD_MIB:-15}" || exit 1
tar czf "$OUT/state/meta.tgz" -C "$packed" manifest.json state.pt
mapfile -t shards < <(cd "$packed" && ls tensors-*.safetensors)
send_shards "${shards[@]}"
