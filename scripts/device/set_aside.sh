#!/usr/bin/env bash
# A device call copies the whole working tree (tracked files, carry included) under a 64 MiB limit; the built-in
# `recurrent` model's weights (19.5 MiB: the previous default, kept for streams) push the tree past it, and no device
# call reads them. Move them out of the checkout before a session's device calls and back after:
#
#   bash scripts/device/set_aside.sh out            # to ../tsfm-set-aside/recurrent/ beside the checkout
#   bash scripts/device/set_aside.sh out default    # other built-ins too (a call that carries a 20M checkpoint to
#                                                   # continue needs the default's 19.5 MiB as well; it must not read it)
#   bash scripts/device/set_aside.sh back           # every model set aside goes back; git status is clean again
set -euo pipefail
cd "$(dirname "$0")/../.."
aside=../tsfm-set-aside
case "${1:-}" in
    out)
        shift
        for model in recurrent "$@"; do
            [ -d "tsfm/models/$model" ] || { echo "error: no built-in model tsfm/models/$model" >&2; exit 2; }
            mkdir -p "$aside/$model"
            mv "tsfm/models/$model"/*.safetensors "$aside/$model/"
            echo "set aside tsfm/models/$model's weights in $aside/$model"
        done
        echo "run '$0 back' after the device calls" ;;
    back)
        for folder in "$aside"/*/; do
            model=$(basename "$folder")
            mv "$folder"*.safetensors "tsfm/models/$model/"
            rmdir "$folder"
        done
        rmdir "$aside"
        git status --short -- tsfm/models ;;
    *)
        echo "usage: $0 out [MODEL ...] | back" >&2; exit 2 ;;
esac
