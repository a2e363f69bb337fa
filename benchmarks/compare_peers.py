"""Our kernels against the fastest public peer per mixer and shape, as ratios, from the benchmark JSONL files.

``bench_kernels.py`` writes our rows (``tsfm.kernels.jsonl``), ``../shared/tools/peer_kernels_bench.py`` the peers'
(``peers.jsonl``). This joins them: for every op and TSFM shape, our forward and forward + backward times, the
fastest peer of the same mixer for each (a peer timed in several calls counts with its best time, which favours the
peer), and ``peer / ours`` (> 1: ours is faster).

Usage::

    python -m benchmarks.compare_peers --ours OUT/kernels.jsonl --peers OLD/peers.jsonl NEW/peers.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

PEERS = {
    "ssd": ("mamba_ssd_chunk", "fla_chunk_simple_gla"),
    "gated_delta_rule": ("fla_chunk_gdn",),
    "mlstm": ("mlstm_triton_limit_chunk", "mlstm_triton_xl_chunk"),
    "slstm": ("flashrnn_slstm_triton_fused", "flashrnn_slstm_cuda_fused"),
}
"""Per op of ours, the name prefixes of the peer kernels that compute the same mixer."""

SHORT = {"mamba_ssd_chunk": "mamba c", "fla_chunk_": "FLA ", "mlstm_triton_": "", "flashrnn_slstm_": "flashrnn "}


def _rows(paths: list[Path]) -> list[dict]:
    rows = []
    for path in paths:
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


def _number(value: object) -> float:
    return value if isinstance(value, float) and math.isfinite(value) else math.inf


def _short(name: str) -> str:
    for prefix, short in SHORT.items():
        if name.startswith(prefix):
            return short + name[len(prefix) :]
    return name


def fastest_peer(peers: list[dict], op: str, shape: list[int], key: str) -> tuple[str, float]:
    """Name and time of the fastest peer row of ``op``'s mixer at ``shape`` for ``key`` (``fwd_ms``/``fwdbwd_ms``)."""
    best = ("-", math.inf)
    for row in peers:
        if row.get("shape") == shape and row["op"].startswith(PEERS.get(op, ())) and _number(row.get(key)) < best[1]:
            best = (_short(row["op"]), row[key])
    return best


def table(ours: list[dict], peers: list[dict]) -> str:
    """Markdown table: ours, the fastest peer and ``peer / ours`` for fwd and fwd+bwd, one row per (op, shape)."""
    lines = [
        "| op | B,T,H,D | ours fwd / fwd+bwd ms | fastest peer fwd | fastest peer fwd+bwd | peer / ours fwd "
        "| peer / ours fwd+bwd |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in ours:
        if row.get("impl") != "triton" or "fwd_ms" not in row or row["op"] not in PEERS:
            continue
        name_f, peer_f = fastest_peer(peers, row["op"], row["shape"], "fwd_ms")
        name_b, peer_b = fastest_peer(peers, row["op"], row["shape"], "fwdbwd_ms")
        ratio_f = f"{peer_f / row['fwd_ms']:.2f}" if math.isfinite(peer_f) else "-"
        ratio_b = f"{peer_b / row['fwdbwd_ms']:.2f}" if math.isfinite(peer_b) else "-"
        peer_f_text = f"{name_f} {peer_f:.3f}" if math.isfinite(peer_f) else "-"
        peer_b_text = f"{name_b} {peer_b:.3f}" if math.isfinite(peer_b) else "-"
        lines.append(
            f"| {row['op']} | {','.join(map(str, row['shape']))} | {row['fwd_ms']:.3f} / {row['fwdbwd_ms']:.3f} "
            f"| {peer_f_text} | {peer_b_text} | {ratio_f} | {ratio_b} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ours", type=Path, nargs="+", required=True, help="kernels.jsonl files of ours")
    parser.add_argument("--peers", type=Path, nargs="+", required=True, help="peers.jsonl files")
    opts = parser.parse_args()
    print(table(_rows(opts.ours), _rows(opts.peers)))


if __name__ == "__main__":
    main()
