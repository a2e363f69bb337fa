"""What both mLSTM chunkwise kernel paths share: the chunk body as ``@triton.jit`` helpers and the tile choices.

The math is that of :func:`tsfm.kernels.mlstm.reference.mlstm_chunkwise` (the executable spec): inside a chunk of
``L`` tokens, with ``b`` the cumulative sum of ``logsig(f̃)`` from the chunk start and ``m_0`` the carried
stabiliser::

    m_t = b_t + max(m_0, max_{s<=t} (ĩ_s - b_s))                    # exactly the recurrent stabiliser
    h_t = (sum_s w_ts (q_t.k_s) v_s + d_t q_t C_0) / (max(|den_t|, exp(-m_t)) + 1e-6)
    w_ts = exp(ĩ_s - b_s + b_t - m_t),  d_t = exp(b_t + m_0 - m_t)

The stabiliser carries no gradient; every other path, the normaliser ``n`` and the ``max(|.|, .)`` included, has its
exact gradient (mlstm_kernels treats the normaliser as a constant in its backward; we do not).

Ragged tails are masked, never padded in memory: a token past ``T`` reads ``ĩ = -1e30`` (weight 0) and
``logsig(f̃) = 0`` (no decay), so the state at the chunk's last row is the state after the last real token.

Matrix products (:func:`dot`) take float32 operands (``ieee`` for float32 inputs, tf32 otherwise) or, with the
``DOT_BF16`` constexpr (:func:`use_bf16_dots`), bf16 operands with float32 accumulation; ``q`` then enters
unscaled and ``scale`` multiplies its products (:func:`scale_q`). The measurements behind every choice here are in
``benchmarks/RESULTS.md`` ("Why the kernels are built as they are").
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from torch import Tensor

from tsfm.kernels._triton_common import block, chunk_block
from tsfm.kernels._triton_common import last_row as _last
from tsfm.kernels._triton_common import logsigmoid as _logsigmoid

EPS = tl.constexpr(1e-6)
"""Added to the read-out's denominator, as in the reference (a constexpr so that kernels may read it)."""

MLSTMState = tuple[Tensor, Tensor, Tensor]
"""``(C [B, H, K, V], n [B, H, K], m [B, H])``, float32."""

DOT_BF16_BY_DEFAULT = os.environ.get("TSFM_MLSTM_BF16_DOTS", "1") != "0"
"""Whether bf16 inputs feed bf16 operands to ``tl.dot`` (float32 accumulation) instead of float32 operands at tf32
(see :func:`use_bf16_dots`); ``TSFM_MLSTM_BF16_DOTS=0`` turns it off. Read at call time, so tests can switch it."""


@dataclass(frozen=True)
class ChunkGrid:
    """The geometry of one call: sizes, tiles, chunk length and ``tl.dot`` operands, decided once per call so that
    the forward and the backward (and both kernel paths) cut the sequence the same way.

    Attributes:
        batch, length, heads, k_dim, v_dim: ``B, T, H, K, V``.
        bt: tokens per chunk (:func:`chunk_length`); bk, bv: key and value tiles covering ``K`` and ``V``.
        n_chunks: ``ceil(T / bt)``.
        precision: ``tl.dot`` precision of float32 operands (:func:`precision`).
        dot_bf16: whether products take bf16 operands (:func:`use_bf16_dots`).
    """

    batch: int
    length: int
    heads: int
    k_dim: int
    v_dim: int
    bt: int
    bk: int
    bv: int
    n_chunks: int
    precision: str
    dot_bf16: bool

    @classmethod
    def of(cls, q: Tensor, v: Tensor, chunk_size: int) -> ChunkGrid:
        """The grid for queries ``q [B, T, H, K]`` and values ``v [B, T, H, V]`` at the requested chunk size."""
        batch, length, heads, k_dim = q.shape
        v_dim = v.shape[-1]
        bk, bv = block(k_dim), block(v_dim)
        bt = chunk_length(length, chunk_size, bk, bv)
        return cls(
            batch=batch, length=length, heads=heads, k_dim=k_dim, v_dim=v_dim, bt=bt, bk=bk, bv=bv,
            n_chunks=triton.cdiv(length, bt), precision=precision(v.dtype), dot_bf16=use_bf16_dots(v.dtype, bk, bv),
        )  # fmt: skip

    @property
    def batch_heads(self) -> int:
        return self.batch * self.heads

    def constexprs(self, **override: object) -> dict[str, object]:
        """The kernels' shared compile-time arguments (``H, K, V, BT, BK, BV, PRECISION, DOT_BF16``); ``override``
        replaces some (a narrower value tile, float32 operands)."""
        values: dict[str, object] = {
            "H": self.heads, "K": self.k_dim, "V": self.v_dim, "BT": self.bt, "BK": self.bk, "BV": self.bv,
            "PRECISION": self.precision, "DOT_BF16": self.dot_bf16,
        }  # fmt: skip
        values.update(override)
        return values

    def empty_states(self, device: torch.device, *, per_chunk: bool) -> MLSTMState:
        """Uninitialised float32 ``(C, n, m)``: one per ``(batch, head)``, or one per chunk with ``per_chunk``."""
        lead = (self.batch, self.heads, self.n_chunks) if per_chunk else (self.batch, self.heads)
        return (
            torch.empty(*lead, self.k_dim, self.v_dim, device=device, dtype=torch.float32),
            torch.empty(*lead, self.k_dim, device=device, dtype=torch.float32),
            torch.empty(*lead, device=device, dtype=torch.float32),
        )


def precision(dtype: torch.dtype) -> str:
    """``tl.dot`` precision of float32 operands: full float32 products for float32 inputs, tf32 for bf16/fp16 inputs
    (their mantissa is shorter than tf32's). Unused where :func:`use_bf16_dots` gives bf16 operands."""
    return "ieee" if dtype == torch.float32 else "tf32"


def use_bf16_dots(dtype: torch.dtype, bk: int, bv: int) -> bool:
    """Whether the kernels feed bf16 operands to ``tl.dot`` (float32 accumulation): for bf16 inputs with state tiles
    at least 64 wide, when :data:`DOT_BF16_BY_DEFAULT` allows it.

    Never for fp16 inputs (rounding them to bf16 drops 3 bits of ``q`` and ``k`` in ``P``, hence in ``den``) nor
    for float32 inputs. ``q, k, v, dh`` are exact as bf16 operands; ``q`` is not pre-scaled (:func:`scale_q`). The
    gate-weighted scores ``P`` and ``ds``, ``k w``, ``dnum`` and the carried ``C_0`` and ``dC`` are rounded to 8
    bits of mantissa as operands; every sum (accumulators, the carried state, ``den = P 1 + d q.n_0``) stays
    float32, so nothing compounds over chunks.
    """
    return DOT_BF16_BY_DEFAULT and dtype == torch.bfloat16 and min(bk, bv) >= 64


def chunk_length(length: int, chunk_size: int, bk: int, bv: int) -> int:
    """Tokens per chunk: ``chunk_size`` rounded (:func:`tsfm.kernels._triton_common.chunk_block`), at most 32 when a
    state tile is 128 wide, so that the backward fits in shared memory and registers (sm_90)."""
    bt = chunk_block(length, chunk_size)
    return min(bt, 32) if max(bk, bv) >= 128 else bt


def num_warps(bk: int, bv: int) -> int:
    """Warps of the kernels that walk the chunks (the sequential path, the split path's scans)."""
    return 8 if bk * bv >= 128 * 128 else 4


def num_warps_per_chunk(bk: int, bv: int) -> int:
    """Warps of the split path's per-chunk kernels: 8 from 64 x 64 tiles on (fewer spills on sm_90)."""
    return 8 if bk * bv >= 64 * 64 else 4


@triton.jit
def dot(a, b, PRECISION: tl.constexpr, DOT_BF16: tl.constexpr):
    """``a @ b`` accumulated in float32, the one matrix product of the chunk body.

    With ``DOT_BF16`` both operands are rounded to bf16 (to nearest) first: half the shared memory and registers of
    float32 operands and the full tensor-core rate. Otherwise they stay float32 and multiply at ``PRECISION``.
    """
    if DOT_BF16:
        return tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16), out_dtype=tl.float32)
    else:
        return tl.dot(a, b, input_precision=PRECISION)


@triton.jit
def scale_q(b_q, scale, DOT_BF16: tl.constexpr):
    """``(q, s)`` such that ``s q`` is the scaled query. With float32 operands ``q`` is scaled here (``s = 1``); with
    bf16 operands ``q`` stays the input, exact in bf16, and ``s = scale`` multiplies the products it enters (rounding
    ``scale q`` to bf16 would perturb the normaliser ``den``, whose cancellation can amplify that without bound)."""
    if DOT_BF16:
        return b_q, scale
    else:
        return b_q * scale, 1.0


@triton.jit
def rows(i_b, i_h, i_c, T, o_t, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr):
    """Offsets of chunk ``i_c``'s rows in ``[B, T, H, K]``, ``[B, T, H, V]`` and ``[B, T, H]`` tensors, and the mask
    of the rows that exist (the last chunk may be ragged)."""
    t = i_c * BT + o_t
    row = (i_b * T + t) * H + i_h
    return t < T, row * K, row * V, row


@triton.jit
def gates(ig, fg, gate, mask_t):
    """``f̃``, ``b`` (cumulative ``logsig(f̃)`` from the chunk start) and ``g = ĩ - b`` of one chunk."""
    b_i = tl.load(ig + gate, mask=mask_t, other=-1e30).to(tl.float32)
    b_f = tl.load(fg + gate, mask=mask_t, other=0.0).to(tl.float32)
    b_b = tl.cumsum(tl.where(mask_t, _logsigmoid(b_f), 0.0), axis=0)
    return b_f, b_b, b_i - b_b


@triton.jit
def stabiliser(b_b, b_g, m0, causal):
    """``m_t = b_t + max(m_0, max_{s<=t} g_s)`` for every row of the chunk."""
    return b_b + tl.maximum(m0, tl.max(tl.where(causal, b_g[None, :], float("-inf")), axis=1))


@triton.jit
def chunk_end(b_b, b_g, m0, o_t, BT: tl.constexpr):
    """At the chunk's last row: the stabiliser ``m_end``, the start state's decay ``d_end`` and each token's weight
    ``exp(g_s + b_end - m_end)`` in the end state. The last row's causal max is the max over the whole chunk, so this
    needs no ``[L, L]`` tile (the split path's state pass uses it alone)."""
    b_end = _last(b_b, o_t, BT)
    m_end = b_end + tl.maximum(m0, tl.max(b_g, axis=0))
    return m_end, tl.exp(b_end + m0 - m_end), tl.exp(b_g + b_end - m_end)


@triton.jit
def state_update(
    C, n, m, b_k, b_v, b_b, b_g, o_t, BT: tl.constexpr, PRECISION: tl.constexpr, DOT_BF16: tl.constexpr
):  # fmt: skip
    """The state at the chunk end from the state at its start: ``C_end = d_end C_0 + sum_s w_s k_s v_s^T``."""
    m_end, d_end, b_wend = chunk_end(b_b, b_g, m, o_t, BT)
    b_kw = b_k * b_wend[:, None]
    C = d_end * C + dot(tl.trans(b_kw), b_v, PRECISION, DOT_BF16)
    return C, d_end * n + tl.sum(b_kw, axis=0), m_end


@triton.jit
def readout(
    b_q, q_scale, b_k, b_v, b_b, b_g, b_m, C0, n0, m0, causal, PRECISION: tl.constexpr, DOT_BF16: tl.constexpr
):  # fmt: skip
    """A chunk's read-out from its start state: ``h = num / denom`` with ``num = P v + d q C_0``,
    ``den = P 1 + d q.n_0``, ``denom = max(|den|, exp(-m)) + eps`` and ``P = w * (q k^T)``; the intermediate values are
    returned for the backward (the forward's compiler drops those it does not use)."""
    b_w = tl.exp(tl.where(causal, b_g[None, :] + (b_b - b_m)[:, None], float("-inf")))
    b_d = tl.exp(b_b + m0 - b_m)
    b_p = dot(b_q, tl.trans(b_k), PRECISION, DOT_BF16) * q_scale * b_w
    b_qc = dot(b_q, C0, PRECISION, DOT_BF16) * q_scale
    b_qn = tl.sum(b_q * n0[None, :], axis=1) * q_scale
    b_num = dot(b_p, b_v, PRECISION, DOT_BF16) + b_d[:, None] * b_qc
    b_den = tl.sum(b_p, axis=1) + b_d * b_qn
    b_floor = tl.exp(-b_m)
    b_denom = tl.maximum(tl.abs(b_den), b_floor) + EPS
    return b_w, b_d, b_p, b_qc, b_qn, b_num, b_den, b_floor, b_denom


@triton.jit
def readout_grad(b_dh, b_num, b_den, b_floor, b_denom):
    """Gradients of ``num`` and ``den`` from that of ``h = num / (max(|den|, exp(-m)) + eps)``; ``dden`` sums over
    the whole value width."""
    b_dnum = b_dh / b_denom[:, None]
    b_sign = tl.where(b_den > 0, 1.0, tl.where(b_den < 0, -1.0, 0.0))
    b_dden = tl.where(tl.abs(b_den) > b_floor, b_sign, 0.0) * (-tl.sum(b_dnum * b_num, axis=1) / b_denom)
    return b_dnum, b_dden


@triton.jit
def dstate_increment(b_q, q_scale, b_d, b_dnum, b_dden, PRECISION: tl.constexpr, DOT_BF16: tl.constexpr):
    """A chunk's own contribution to the gradient of its start state: ``(q d)^T dnum`` and ``(q d)^T dden``."""
    b_qd = b_q * b_d[:, None]
    if DOT_BF16:  # keep q an exact bf16 operand: the weight d goes on dnum, rounded to bf16 anyway
        b_dC = dot(tl.trans(b_q), b_dnum * b_d[:, None], PRECISION, DOT_BF16) * q_scale
    else:
        b_dC = dot(tl.trans(b_qd), b_dnum, PRECISION, DOT_BF16)
    return b_dC, tl.sum(b_qd * b_dden[:, None], axis=0) * q_scale


@triton.jit
def chunk_bwd(
    b_q, q_scale, b_k, b_v, b_dh, b_f, b_b, b_g, C0, n0, m0, dC, dn, o_t, causal,
    BT: tl.constexpr, PRECISION: tl.constexpr, DOT_BF16: tl.constexpr,
):  # fmt: skip
    """One chunk's backward from its start state ``(C0, n0, m0)`` and the gradient ``(dC, dn)`` of its end state.

    Returns ``dq`` (of the scaled ``q``), ``dk, dv, dĩ, df̃``, and the start-state gradient's pieces
    ``d, dnum, dden, d_end`` (see :func:`dstate_increment`).
    """
    # Recompute the chunk's forward from its start state.
    b_m = stabiliser(b_b, b_g, m0, causal)
    b_w, b_d, b_p, b_qc, b_qn, b_num, b_den, b_floor, b_denom = readout(
        b_q, q_scale, b_k, b_v, b_b, b_g, b_m, C0, n0, m0, causal, PRECISION, DOT_BF16
    )
    b_dnum, b_dden = readout_grad(b_dh, b_num, b_den, b_floor, b_denom)

    # Intra-chunk part: P = w * (q k^T), num = P v + d qC0, den = P 1 + d q.n0.
    b_dp = dot(b_dnum, tl.trans(b_v), PRECISION, DOT_BF16) + b_dden[:, None]
    b_ds = b_dp * b_w
    b_dlogw = b_dp * b_p
    b_dq = dot(b_ds, b_k, PRECISION, DOT_BF16) + b_d[:, None] * (
        dot(b_dnum, tl.trans(C0), PRECISION, DOT_BF16) + b_dden[:, None] * n0[None, :]
    )
    b_dk = dot(tl.trans(b_ds), b_q, PRECISION, DOT_BF16) * q_scale
    b_dv = dot(tl.trans(b_p), b_dnum, PRECISION, DOT_BF16)
    b_dd = tl.sum(b_dnum * b_qc, axis=1) + b_dden * b_qn

    # Chunk-end state: C_end = d_end C0 + sum_s w_end_s k_s v_s^T (likewise n), fed by dC, dn of the next chunk.
    _, d_end, b_wend = chunk_end(b_b, b_g, m0, o_t, BT)
    b_x = dot(b_v, tl.trans(dC), PRECISION, DOT_BF16) + dn[None, :]
    b_dk += b_wend[:, None] * b_x
    b_dv += b_wend[:, None] * dot(b_k, dC, PRECISION, DOT_BF16)
    b_dlogwend = tl.sum(b_k * b_x, axis=1) * b_wend
    dd_end = tl.sum(tl.sum(C0 * dC, axis=1), axis=0) + tl.sum(n0 * dn, axis=0)

    # Log-weights -> gates: log w_ts = i_s - b_s + b_t - m_t, d_t = exp(b_t + m0 - m_t), b = cumsum(logsig f).
    b_di = tl.sum(b_dlogw, axis=0) + b_dlogwend
    b_db = tl.sum(b_dlogw, axis=1) - tl.sum(b_dlogw, axis=0) + b_dd * b_d - b_dlogwend
    b_db += tl.where(o_t == BT - 1, tl.sum(b_dlogwend, axis=0) + dd_end * d_end, 0.0)
    b_dlogf = tl.sum(b_db, axis=0) - tl.cumsum(b_db, axis=0) + b_db
    b_df = b_dlogf * tl.sigmoid(-b_f)
    return b_dq, b_dk, b_dv, b_di, b_df, b_d, b_dnum, b_dden, d_end
