"""Transformer baseline ``"transformer"`` (no options): causal multi-head self-attention with rotary positions.

Attention runs through ``torch.nn.functional.scaled_dot_product_attention`` (flash / memory-efficient kernels on
GPU). The streaming state is a KV cache ``(k [B, H, L, D], v [B, H, L, D])`` of the ``L`` tokens seen so far, with
keys stored already rotated; ``L`` is also the position offset, so RoPE positions continue across calls. The cache
grows with the sequence (that is the baseline's cost the recurrent backbones avoid).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tsfm.backbones.blocks import BlockStack, Mixer, init_linear, residual_out_std
from tsfm.backbones.registry import State, format_spec, register_backbone, reject_options
from tsfm.config import ModelConfig

ROPE_BASE = 10_000.0


def rotary(x: torch.Tensor, offset: int, base: float = ROPE_BASE) -> torch.Tensor:
    """Rotate ``x [B, H, T, D]`` by positions ``offset .. offset + T - 1`` (RoPE, "rotate half" pairing ``i`` with
    ``i + D/2``). Angles are computed in float64 so long positions keep their precision.

    Written as ``x * cos + roll(x, D/2) * [-sin, sin]`` over full-width ``[T, D]`` tables rather than as four
    half-width products joined by a concatenation: the same numbers bit for bit, in fewer passes over the
    ``[B, H, T, D]`` tensor: 2.4x faster alone on the CPU at the default's shapes, ``predict`` 1.6% faster
    (``benchmarks/RESULTS.md``)."""
    length, dim = x.shape[-2], x.shape[-1]
    inv_freq = base ** (-torch.arange(0, dim, 2, device=x.device, dtype=torch.float64) / dim)
    positions = torch.arange(offset, offset + length, device=x.device, dtype=torch.float64)
    angles = torch.outer(positions, inv_freq)  # [T, D/2]
    cos, sin = angles.cos(), angles.sin()
    cos, sin = torch.cat([cos, cos], dim=-1).to(x.dtype), torch.cat([-sin, sin], dim=-1).to(x.dtype)  # [T, D]
    return x * cos + x.roll(dim // 2, dims=-1) * sin


def attend_after_shared_prefix(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, prefix_k: torch.Tensor,
                               prefix_v: torch.Tensor) -> torch.Tensor:
    """Causal attention of ``q, k, v [B, H, T, D]`` after a key set that every series shares (``prefix_k,
    prefix_v [1, H, L, D]``, already rotated; every query sees all of it): ``[B, H, T, D]``.

    The same numbers as attending over the prefix copied once per series and joined to ``k, v``, without the copy:
    a short context read after the fully missing tokens of a longer trained window
    (``Forecaster.read_context``) shares their keys across the batch, and at the default's shapes (context 512 of
    2,048: 48 shared keys, 16 own) that copy and join took a third of CPU inference time. The scores against the
    prefix come from one matrix product per head over all series' queries; one softmax spans both key sets."""
    batch, heads, length, dim = q.shape
    shared = prefix_k.shape[-2]
    queries = q.transpose(0, 1).reshape(heads, batch * length, dim)  # [H, B*T, D]: every series against one prefix
    prefix_scores = (queries @ prefix_k[0].transpose(-1, -2)).unflatten(1, (batch, length)).transpose(0, 1)
    own_scores = q @ k.transpose(-1, -2)  # [B, H, T, T]
    future = torch.ones(length, length, dtype=torch.bool, device=q.device).triu(1)
    own_scores = own_scores.masked_fill(future, float("-inf"))
    weights = torch.softmax(torch.cat([prefix_scores, own_scores], dim=-1).float() * dim**-0.5, dim=-1).to(q.dtype)
    prefix_weights, own_weights = weights.split([shared, length], dim=-1)
    flat_prefix_weights = prefix_weights.transpose(0, 1).reshape(heads, batch * length, shared)
    from_prefix = (flat_prefix_weights @ prefix_v[0]).unflatten(1, (batch, length)).transpose(0, 1)
    return from_prefix + own_weights @ v


class CausalSelfAttention(Mixer):
    """Multi-head causal self-attention with RoPE; state ``(k_cache, v_cache)``, each ``[B, H, L, D]``, or
    ``[1, H, L, D]`` for a cache that every series of the batch shares (:func:`attend_after_shared_prefix`)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.n_heads, self.head_dim = config.n_heads, config.head_dim
        self.qkv_proj = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.out_proj = nn.Linear(config.d_model, config.d_model, bias=False)
        init_linear(self.qkv_proj)
        init_linear(self.out_proj, residual_out_std(config))

    def forward(
        self, x: torch.Tensor, state: State | None = None, return_state: bool = False
    ) -> tuple[torch.Tensor, State | None]:
        offset = 0 if state is None else state[0].shape[-2]
        qkv = self.qkv_proj(x).unflatten(-1, (3, self.n_heads, self.head_dim)).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k = rotary(q, offset), rotary(k, offset)  # q, k, v: [B, H, T, D]
        if state is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif state[0].shape[0] == 1 < q.shape[0]:  # one cache shared by the batch
            prefix_k, prefix_v = state[0].to(k.dtype), state[1].to(v.dtype)
            y = attend_after_shared_prefix(q, k, v, prefix_k, prefix_v)
            if return_state:  # the joined cache, one copy per series, only when asked for
                k = torch.cat([prefix_k.expand(k.shape[0], -1, -1, -1), k], dim=-2)
                v = torch.cat([prefix_v.expand(v.shape[0], -1, -1, -1), v], dim=-2)
        else:
            k, v = torch.cat([state[0].to(k.dtype), k], dim=-2), torch.cat([state[1].to(v.dtype), v], dim=-2)
            # SDPA's is_causal aligns the mask top-left; with a cache query i sees keys 0 .. offset + i.
            query_pos = torch.arange(offset, offset + q.shape[-2], device=x.device)
            mask = torch.arange(k.shape[-2], device=x.device) <= query_pos.unsqueeze(-1)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        y = self.out_proj(y.transpose(1, 2).flatten(-2))
        return y, ((k, v) if return_state else None)

    def init_state(self, batch_size: int, *, device: torch.device | str | None, dtype: torch.dtype) -> State:
        empty = torch.zeros(batch_size, self.n_heads, 0, self.head_dim, device=device, dtype=dtype)
        return empty, empty.clone()

    def step(self, x_t: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        y, state = self.forward(x_t.unsqueeze(1), state, return_state=True)
        return y.squeeze(1), state


@register_backbone("transformer")
class TransformerBackbone(BlockStack):
    """Stack of attention mixers in the shared pre-norm block with a gated FFN (a LLaMA-style decoder)."""

    reads_past_trained_length = False
    shares_state_across_batch = True

    def __init__(self, config: ModelConfig, options: str | None = None) -> None:
        reject_options("transformer", options)
        if config.head_dim % 2:
            raise ValueError(f"backbone spec {format_spec('transformer', options)!r}: RoPE needs an even head "
                             f"dim, got d_model / n_heads = {config.head_dim}")
        super().__init__(config, options, [CausalSelfAttention(config) for _ in range(config.n_layers)])

