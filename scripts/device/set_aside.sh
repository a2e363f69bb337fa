#!/usr/bin/env bash
# A device call copies the whole working tree (tracked files, carry included) under a 64 MiB limit; the built-in
# `recurrent` model's weights (19.5 MiB: the previous default, kept for streams) push the tree past it, and no device
# call reads them. Move them out of the checkout before a session's device calls and back after:
#
#   bash scripts/device/set_aside.sh out    # to ../tsfm-set-aside/ beside the checkout
#   bash scripts/device/set_aside.sh back   # git status is clean again
set -euo pipefail
cd "$(dirname "$0")/../.."
aside=../tsfm-set-aside
weights=tsfm/models/recurrent
case "${1:-}" in
    out)
        mkdir -p "$aside"
        mv "$weights"/*.safetensors "$aside/"
        echo "set aside $weights's weights in $aside; run '$0 back' after the device calls" ;;
    back)
        mv "$aside"/*.safetensors "$weights/"
        rmdir "$aside"
        git status --short -- tsfm/models ;;
    *)
        echo "usage: $0 out|back" >&2; exit 2 ;;
esac
