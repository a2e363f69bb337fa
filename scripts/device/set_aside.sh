#!/usr/bin/env bash
# A device call copies the whole working tree (tracked files, carry included) under a 64 MiB limit; the built-in
# `recurrent` model's weights (19.0 MiB: the previous default, kept for streams) push the tree past it, and no device
# call reads them. Move them out of the checkout before a session's device calls and back after:
#
#   bash scripts/device/set_aside.sh out            # to ../tsfm-set-aside/recurrent/ beside the checkout
#   bash scripts/device/set_aside.sh out default    # other built-ins too (a call that carries a 20M checkpoint to
#                                                   # continue needs the default's 19.4 MiB as well; it must not read it)
#   bash scripts/device/set_aside.sh out default records
#                                                   # and the records no call reads (benchmarks/results/ and reports/,
#                                                   # 23 MiB): room for a packed run state (`tsfm pack-run`, 39 MiB at 10M)
#   bash scripts/device/set_aside.sh back           # everything set aside goes back; git status is clean again
#
# `out` ends by printing the bytes of tracked files left in the checkout: with the carried paths, under 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/../.."
aside=../tsfm-set-aside
records=(benchmarks/results reports)
case "${1:-}" in
    out)
        shift
        for name in recurrent "$@"; do
            if [ "$name" = records ]; then
                mkdir -p "$aside/_records"
                for folder in "${records[@]}"; do
                    mkdir -p "$aside/_records/$(dirname "$folder")"
                    mv "$folder" "$aside/_records/$folder"
                done
                echo "set aside ${records[*]} in $aside/_records"
                continue
            fi
            [ -d "tsfm/models/$name" ] || { echo "error: no built-in model tsfm/models/$name" >&2; exit 2; }
            mkdir -p "$aside/$name"
            mv "tsfm/models/$name"/*.safetensors "$aside/$name/"
            echo "set aside tsfm/models/$name's weights in $aside/$name"
        done
        git ls-files -z | xargs -0 stat -c %s 2>/dev/null \
            | awk '{s += $1} END {printf "tracked files left in the checkout: %.1f MiB (add the carried paths)\n", s / 2^20}' || true
        echo "run '$0 back' after the device calls" ;;
    back)
        if [ -d "$aside/_records" ]; then
            for folder in "${records[@]}"; do
                mv "$aside/_records/$folder" "$folder"
            done
            rm -rf "$aside/_records"
        fi
        for folder in "$aside"/*/; do
            [ -d "$folder" ] || continue
            model=$(basename "$folder")
            mv "$folder"*.safetensors "tsfm/models/$model/"
            rmdir "$folder"
        done
        rmdir "$aside"
        git status --short -- tsfm/models "${records[@]}" ;;
    *)
        echo "usage: $0 out [MODEL ...] [records] | back" >&2; exit 2 ;;
esac
