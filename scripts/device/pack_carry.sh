#!/usr/bin/env bash
# Pack ignored paths a device call needs into .carry/carry.tgz, to carry more under the 64 MiB transfer limit:
# data/device gzips from 19.3 to 7.7 MB, bf16 weights by about a fifth. The device scripts unpack it into the
# repository root before anything else (scripts/device/setup.sh).
#
#   bash scripts/device/pack_carry.sh data/device runs/x01h-20m/model    # then carry [".whl", ".carry"]
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 PATH [PATH ...] (paths relative to the repository root)" >&2; exit 2; }
for path in "$@"; do
    [ -e "$path" ] || { echo "error: $path does not exist" >&2; exit 2; }
done
mkdir -p .carry
tar czf .carry/carry.tgz "$@"
du -h .carry/carry.tgz
