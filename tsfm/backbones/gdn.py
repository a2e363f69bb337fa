"""Gated DeltaNet backbone ``"gdn"`` and ``"gdn[neg_eigval]"``: the GDN paper's layer (FLA's ``GatedDeltaNet``)
around the ``gated_delta_rule`` op.

Layer (Yang, Kautz & Hatamizadeh 2025): ``q, k, v`` projections, each through a short causal depthwise conv + SiLU;
``q, k`` L2-normalised per head (the delta rule needs ``|k| = 1`` for ``I - beta k k^T`` to be a contraction);
decay ``g = -exp(A_log) softplus(W_a x + dt_bias)`` (log of ``alpha``, Mamba-2's parametrisation); write strength
``beta = sigmoid(W_b x)``, or ``2 sigmoid(W_b x)`` with ``neg_eigval`` so the transition's eigenvalues span
``[-1, 1]`` (Grazzi et al. 2025: negative eigenvalues let a linear RNN track state, e.g. parity); output per-head
RMSNorm gated by ``silu(W_g x)``; output projection.

Sizes: ``H = config.n_heads`` heads, key width ``K = d / H``, value width ``V = VALUE_EXPAND * K`` (FLA's
``expand_v = 2``), so the state per head is ``K x 2K``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tsfm.backbones.blocks import (
    BlockStack,
    CausalConv1d,
    Mixer,
    MultiHeadRMSNorm,
    init_a_log,
    init_dt_bias,
    init_linear,
    residual_out_std,
    state_dtype,
)
from tsfm.backbones.registry import State, format_spec, register_backbone
from tsfm.config import ModelConfig
from tsfm.kernels import ops

VALUE_EXPAND = 2
OPTIONS = ("neg_eigval",)


def l2_normalize(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x / |x|`` over the last dim (smooth at 0, as FLA's l2norm)."""
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps)


class GatedDeltaNetLayer(Mixer):
    """Gated DeltaNet mixer; state ``(conv_state [B, K-1, 2HK + HV], S [B, H, K, V])``."""

    def __init__(self, config: ModelConfig, neg_eigval: bool = False) -> None:
        super().__init__()
        d, heads = config.d_model, config.n_heads
        self.n_heads, self.key_dim, self.value_dim = heads, config.head_dim, VALUE_EXPAND * config.head_dim
        self.beta_scale = 2.0 if neg_eigval else 1.0
        self.chunk_size = config.chunk_size
        self.qkv_widths = [heads * self.key_dim, heads * self.key_dim, heads * self.value_dim]
        self.qkv_proj = nn.Linear(d, sum(self.qkv_widths), bias=False)
        self.conv = CausalConv1d(sum(self.qkv_widths), config.conv_kernel)  # depthwise: = one conv per q, k, v
        self.ab_proj = nn.Linear(d, 2 * heads, bias=False)  # decay input a and write-strength input b per head
        self.A_log = nn.Parameter(init_a_log(heads))
        self.dt_bias = nn.Parameter(init_dt_bias(heads))
        self.gate_proj = nn.Linear(d, heads * self.value_dim, bias=False)
        self.norm = MultiHeadRMSNorm(heads, self.value_dim)
        self.out_proj = nn.Linear(heads * self.value_dim, d, bias=False)
        for layer in (self.qkv_proj, self.ab_proj, self.gate_proj):
            init_linear(layer)
        init_linear(self.out_proj, residual_out_std(config))

    def _rule_inputs(self, qkv: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Conv output (pre-SiLU) and block input -> ``q, k [..., H, K]``, ``v [..., H, V]``, ``g, beta [..., H]``."""
        q, k, v = F.silu(qkv).split(self.qkv_widths, dim=-1)
        q = l2_normalize(q.unflatten(-1, (self.n_heads, self.key_dim)))
        k = l2_normalize(k.unflatten(-1, (self.n_heads, self.key_dim)))
        v = v.unflatten(-1, (self.n_heads, self.value_dim))
        a, b = self.ab_proj(x).unflatten(-1, (2, self.n_heads)).unbind(-2)
        g = -torch.exp(self.A_log) * F.softplus(a + self.dt_bias)
        beta = self.beta_scale * torch.sigmoid(b)
        return q, k, v, g, beta

    def _output(self, o: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        gate = self.gate_proj(x).unflatten(-1, (self.n_heads, self.value_dim))
        return self.out_proj((self.norm(o.to(x.dtype)) * F.silu(gate)).flatten(-2))

    def forward(
        self, x: torch.Tensor, state: State | None = None, return_state: bool = False
    ) -> tuple[torch.Tensor, State | None]:
        conv_state, rule_state = (None, None) if state is None else state
        qkv, conv_state = self.conv(self.qkv_proj(x), conv_state, return_state)
        o, rule_state = ops.gated_delta_rule(*self._rule_inputs(qkv, x), initial_state=rule_state,
                                             output_final_state=return_state, chunk_size=self.chunk_size)
        return self._output(o, x), ((conv_state, rule_state) if return_state else None)

    def init_state(self, batch_size: int, *, device: torch.device | str | None, dtype: torch.dtype) -> State:
        conv_state = self.conv.init_state(batch_size, device=device, dtype=dtype)
        rule_state = ops.gated_delta_rule_init_state(batch_size, self.n_heads, self.key_dim, self.value_dim,
                                                     device=device, dtype=state_dtype(dtype))
        return conv_state, rule_state

    def step(self, x_t: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        conv_state, rule_state = state
        qkv, conv_state = self.conv.step(self.qkv_proj(x_t), conv_state)
        o, rule_state = ops.gated_delta_rule_step(*self._rule_inputs(qkv, x_t), rule_state)
        return self._output(o, x_t), (conv_state, rule_state)


@register_backbone("gdn")
class GatedDeltaNetBackbone(BlockStack):
    """Stack of Gated DeltaNet mixers; ``gdn[neg_eigval]`` uses ``beta in (0, 2)``."""

    def __init__(self, config: ModelConfig, options: str | None = None) -> None:
        if options is not None and options not in OPTIONS:
            raise ValueError(f"backbone spec {format_spec('gdn', options)!r}: unknown option {options!r}; "
                             f"'gdn' takes none or one of {', '.join(OPTIONS)}")
        neg_eigval = options == "neg_eigval"
        super().__init__(config, options, [GatedDeltaNetLayer(config, neg_eigval=neg_eigval)
                                           for _ in range(config.n_layers)])
        self.neg_eigval = neg_eigval
