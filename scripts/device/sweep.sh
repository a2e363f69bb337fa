#!/usr/bin/env bash
# One GPU-machine call of the scaling sweep (issue 12): `tsfm sweep` (in runs/sweep: see below), runs side by side, then
# the sweep folder packed into $OUT (rows, provenance, configs, logs; no weights or Lightning checkpoints).
#
#   PARALLEL=4 MINUTES=8 bash scripts/device/sweep.sh --backbones 'xlstm[3:1],mamba2,gdn' --presets 1M,3M,10M
#   PARALLEL=1 MINUTES=7.6 bash scripts/device/sweep.sh --backbones 'xlstm[3:1]' --presets 40M --read-alone-rows
#   PARALLEL=1 MINUTES=8.3 BUDGET_SECONDS=560 bash scripts/device/sweep.sh --backbones mamba2 --presets 80M \
#       --read-alone-rows --compile        # then at once, to finish and score it on the same warm machine:
#   RESUME_ONLY=1 PARALLEL=1 MINUTES=4 BUDGET_SECONDS=330 bash scripts/device/sweep.sh --backbones mamba2 ...
#
# --compile (from 80M on): the same loss, 1.7-2.0x faster steps at 80M on an H100 (benchmarks/results/
# gpu-2026-12-06-session30); not worth its start-up (tens of seconds per run) for runs of a minute or less (1M, 3M).
#
# --read-alone-rows (every run from 40M on) also scores short contexts read alone, as the 1M-10M rows were scored.
#
#   SWEEP=runs/sweep-tokens SEED_FROM=reports/sweep-tokens PARALLEL=4 MINUTES=4.5 bash scripts/device/sweep.sh \
#       --backbones 'xlstm[3:1],xlstm[3:1,conv],mamba2,gdn' --presets 1M --tokens 1M=48e6 --read-alone-rows
#                                        # another token budget: its own folder, packed under its own name
#                                        # (tar xzf $FILES_AT/sweep.tgz -C reports gives reports/sweep-tokens)
#
# MINUTES is each run's training budget in this call; BUDGET_SECONDS (default 540) bounds the whole sweep command;
# RESUME_ONLY=1 stops a call at once where no unfinished run waits on the machine (see below).
#
# Carry: .whl (wheels), data/device (capped corpus + benchmark from scripts/cap_corpus.py; or gzipped in .carry by
# scripts/device/pack_carry.sh). The sweep runs in runs/sweep on the device: runs/ is git-ignored, so a warm machine
# keeps it between calls (a folder that git does not ignore is replaced by this machine's copy at every call). But a
# machine stays warm only 30 s after a call: the eleventh session's calls, each issued minutes after the last reply,
# never found one warm; the twelfth session's, each issued at once, always did (and resumed a run stopped 3 steps
# short). So issue the next call at once, and still plan each call so that its runs FINISH inside it (MINUTES). A fresh
# machine seeds runs/sweep from the committed reports/sweep, whose results.csv says which runs are finished, so they
# are skipped. Locally: `tar xzf $FILES_AT/sweep.tgz -C reports` merges the call's finished runs into reports/sweep,
# then `tsfm report --sweep reports/sweep/results.csv --out reports` writes the report.
set -uo pipefail
PARALLEL=${PARALLEL:-4}; MINUTES=${MINUTES:?set MINUTES (time budget per run in this call)}
SWEEP=${SWEEP:-runs/sweep}; BUDGET_SECONDS=${BUDGET_SECONDS:-540}
# RESUME_ONLY=1 (the second of two chained calls): stop at once, before any set-up, unless this machine holds an
# unfinished run to resume. A fresh machine (the warm one was released between the calls) would start the runs again
# from zero and stop them unfinished at MINUTES: device time for nothing (the eleventh session's third call did so)
if [ "${RESUME_ONLY:-0}" = 1 ] && ! compgen -G "$SWEEP/runs/*/checkpoints/last.ckpt" > /dev/null; then
    echo "RESUME_ONLY=1: no unfinished run in $SWEEP on this machine (a fresh one: the warm machine was released);" \
        "nothing trained" >&2
    exit 3
fi
source scripts/device/setup.sh  # unpack .carry, install the carried wheels, PYTHONPATH
# SEED_FROM: the committed copy of this sweep that a fresh machine starts from (another sweep, e.g. one with its own
# --tokens in SWEEP=runs/sweep-tokens, names its own folder, or none yet: seeding it from the main sweep's folder
# would make tsfm sweep refuse the folder as another sweep's)
SEED_FROM=${SEED_FROM:-reports/sweep}
if [ ! -f "$SWEEP/sweep.json" ] && [ -f "$SEED_FROM/sweep.json" ]; then
    mkdir -p "$SWEEP" && cp -r "$SEED_FROM/." "$SWEEP/" && echo "seeded $SWEEP from $SEED_FROM"
fi
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
started=$(date +%s)
# MINUTES stops each run cleanly (a Lightning checkpoint to resume from); the timeout is the backstop that keeps the
# packing below inside the call's 600 s when runs queue behind each other (it signals every process of the sweep)
timeout --kill-after=15 "$BUDGET_SECONDS" python3 -m tsfm sweep --out "$SWEEP" --real-data data/device/pretrain \
    --benchmark data/device/benchmark --parallel "$PARALLEL" --max-minutes "$MINUTES" "$@"
status=$?
echo "sweep call: $(( $(date +%s) - started )) s, exit $status"
nvidia-smi --query-gpu=memory.used --format=csv,noheader
# runs with rows in results.csv (finished): one line each, and only they are packed (with sweep.json, results.csv
# and every run's log), so a run stopped by MINUTES never reaches reports/sweep half-trained
python3 - "$SWEEP" "$OUT/sweep.tgz" <<'PY'
import csv, json, sys, tarfile
from pathlib import Path
sweep, target = Path(sys.argv[1]), sys.argv[2]
results = sweep / "results.csv"
finished = sorted({row["run"] for row in csv.DictReader(results.open())}) if results.is_file() else []
for name in finished:
    d = json.loads((sweep / "runs" / name / "provenance.json").read_text())
    print(name, {k: d.get(k) for k in ("steps", "tokens_seen", "train_seconds", "best_val_loss")},
          f"tokens/s {d['tokens_seen'] / max(d['train_seconds'], 1e-9):.0f}")
with tarfile.open(target, "w:gz") as tar:
    for path in [sweep / "sweep.json", results, *sorted((sweep / "runs").glob("*.log"))]:
        if path.is_file():
            tar.add(path, arcname=str(Path(sweep.name) / path.relative_to(sweep)))
    for name in finished:
        for path in sorted((sweep / "runs" / name).rglob("*")):
            # rows.json: the run's rows, already in results.csv (packing it again would only grow the checkout)
            if (path.is_file() and path.suffix not in {".safetensors", ".ckpt"} and "checkpoints" not in path.parts
                    and path.name != "rows.json"):
                tar.add(path, arcname=str(Path(sweep.name) / path.relative_to(sweep)))
print(f"packed {len(finished)} finished run(s) into {target}")
# unfinished runs: how far they got (their last logged step), so a call whose runs do not finish still measures speed
for run in sorted(p for p in (sweep / "runs").iterdir() if p.is_dir() and p.name not in finished):
    logged = [row for f in sorted(run.glob("logs/version_*/metrics.csv")) for row in csv.DictReader(f.open())]
    print(f"unfinished {run.name}: step {max((int(r['step']) for r in logged), default=0)} logged")
PY
ls -la "$OUT"
exit $status
