#!/usr/bin/env bash
# An A/B of a training setting's speed: the runs of RUNS_FILE one after the other (never side by side, which would
# share the GPU), each for MINUTES, on one machine, so their rates compare (same card, same compile cache). Prints
# per run its steady steps/s (from step SKIP on, past the compile: summarise_run.py --steady-from) and its GPU SM use
# (nvidia-smi dmon, 5 s samples, where there is a GPU). Nothing comes back but the output (a speed measurement).
#
#   MINUTES=2 bash scripts/device/rate_ab.sh scripts/device/runs/prior-block-ab.txt -- ARGS
#
# RUNS_FILE: one run per line, "NAME extra tsfm-train arguments" (arguments after -- are shared by every run). Each
# run is a fresh one (its folder is removed first) whose schedule never ends (--steps 1000000): MINUTES stops it, and
# the rate does not depend on the learning rate.
set -uo pipefail
source scripts/device/setup.sh
MINUTES=${MINUTES:?set MINUTES}; SKIP=${SKIP:-300}
RUNS_FILE=$1; shift; [ "${1:-}" = "--" ] && shift
while read -r name extra; do
    [ -z "$name" ] && continue
    rm -rf "runs/$name"
    use=$(mktemp)
    if command -v nvidia-smi > /dev/null; then nvidia-smi dmon -s u -d 5 > "$use" 2>/dev/null & dmon=$!; else dmon=; fi
    set -f  # split, but never glob (a spec such as xlstm[3:1] is a bracket pattern to the shell)
    # shellcheck disable=SC2086  # the extra arguments are meant to split
    python3 -m tsfm train --steps 1000000 --max-minutes "$MINUTES" --out "runs/$name" "$@" $extra \
        > "runs_$name.log" 2>&1 < /dev/null
    status=$?
    set +f
    [ -n "$dmon" ] && kill "$dmon" 2>/dev/null
    [ "$status" = 0 ] || { echo "$name: tsfm train failed ($status)"; tail -5 "runs_$name.log"; continue; }
    python3 scripts/device/summarise_run.py "runs/$name" --steady-from "$SKIP" | tail -1
    awk -v name="$name" -f scripts/device/gpu_use.awk "$use"
    rm -f "$use"
done < "$RUNS_FILE"
