"""Mamba-2 backbone ``"mamba2"`` (no options): the Mamba-2 paper's layer around the ``ssd`` op.

Layer (Dao & Gu 2024, ``Mamba2`` with ``ngroups = 1``): ``in_proj`` to ``(z, x, B, C, dt)``; short causal depthwise
conv + SiLU on ``(x, B, C)``; ``dt = softplus(dt + dt_bias)``; ``y = SSD(x, dt, A = exp(A_log), B, C) + D x``;
gated RMSNorm ``norm(y * silu(z))`` over the inner width; ``out_proj``.

Sizes: inner width ``EXPAND * d_model`` split into ``config.n_heads`` heads of ``P = 2 d / H`` channels, one
shared ``B, C`` of state size ``STATE_DIM = 64`` (Mamba-2's default is 128 at d >= 768; 64 keeps the state of the
small models here in proportion; the ``ssd`` op takes ``B, C`` per head, so they are broadcast over heads).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tsfm.backbones.blocks import (
    BlockStack,
    CausalConv1d,
    Mixer,
    RMSNorm,
    init_a_log,
    init_dt_bias,
    init_linear,
    residual_out_std,
    state_dtype,
)
from tsfm.backbones.registry import State, register_backbone, reject_options
from tsfm.config import ModelConfig
from tsfm.kernels import ops

EXPAND = 2
STATE_DIM = 64


class Mamba2Layer(Mixer):
    """Mamba-2 mixer; state ``(conv_state [B, K-1, 2d+2N], ssm_state [B, H, N, P])``."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.d_inner = EXPAND * config.d_model
        self.n_heads, self.state_dim = config.n_heads, STATE_DIM
        self.head_dim = self.d_inner // self.n_heads  # exact: the config checks d_model % n_heads == 0
        self.chunk_size = config.chunk_size
        conv_dim = self.d_inner + 2 * self.state_dim
        self.in_proj = nn.Linear(config.d_model, self.d_inner + conv_dim + self.n_heads, bias=False)
        self.conv = CausalConv1d(conv_dim, config.conv_kernel)
        self.dt_bias = nn.Parameter(init_dt_bias(self.n_heads))
        self.A_log = nn.Parameter(init_a_log(self.n_heads))
        self.D = nn.Parameter(torch.ones(self.n_heads))
        self.norm = RMSNorm(self.d_inner)
        self.out_proj = nn.Linear(self.d_inner, config.d_model, bias=False)
        init_linear(self.in_proj)
        init_linear(self.out_proj, residual_out_std(config))

    def _split(self, zxbcdt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``in_proj`` output -> ``z [..., d_inner]``, conv input ``[..., d_inner + 2N]``, ``dt [..., H]``."""
        return zxbcdt.split([self.d_inner, self.d_inner + 2 * self.state_dim, self.n_heads], dim=-1)

    def _ssm_inputs(self, xbc: torch.Tensor, dt: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Conv output (pre-SiLU) and raw dt -> the ssd op's ``x [..., H, P]``, ``dt``, ``A``, ``B, C [..., H, N]``."""
        x, b, c = F.silu(xbc).split([self.d_inner, self.state_dim, self.state_dim], dim=-1)
        x = x.unflatten(-1, (self.n_heads, self.head_dim))
        heads = (*b.shape[:-1], self.n_heads, self.state_dim)
        b, c = b.unsqueeze(-2).expand(heads), c.unsqueeze(-2).expand(heads)
        return x, F.softplus(dt + self.dt_bias), torch.exp(self.A_log), b, c

    def _output(self, y: torch.Tensor, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        y = y.to(x.dtype) + self.D.unsqueeze(-1) * x
        return self.out_proj(self.norm(y.flatten(-2) * F.silu(z)))

    def forward(
        self, u: torch.Tensor, state: State | None = None, return_state: bool = False
    ) -> tuple[torch.Tensor, State | None]:
        conv_state, ssm_state = (None, None) if state is None else state
        z, xbc, dt = self._split(self.in_proj(u))
        xbc, conv_state = self.conv(xbc, conv_state, return_state)
        x, dt, a, b, c = self._ssm_inputs(xbc, dt)
        y, ssm_state = ops.ssd(x, dt, a, b, c, initial_state=ssm_state, output_final_state=return_state,
                               chunk_size=self.chunk_size)
        return self._output(y, x, z), ((conv_state, ssm_state) if return_state else None)

    def init_state(self, batch_size: int, *, device: torch.device | str | None, dtype: torch.dtype) -> State:
        conv_state = self.conv.init_state(batch_size, device=device, dtype=dtype)
        ssm_state = ops.ssd_init_state(batch_size, self.n_heads, self.state_dim, self.head_dim, device=device,
                                       dtype=state_dtype(dtype))
        return conv_state, ssm_state

    def step(self, u_t: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        conv_state, ssm_state = state
        z, xbc, dt = self._split(self.in_proj(u_t))
        xbc, conv_state = self.conv.step(xbc, conv_state)
        x, dt, a, b, c = self._ssm_inputs(xbc, dt)
        y, ssm_state = ops.ssd_step(x, dt, a, b, c, ssm_state)
        return self._output(y, x, z), (conv_state, ssm_state)


@register_backbone("mamba2")
class Mamba2Backbone(BlockStack):
    """Stack of Mamba-2 mixers, each in the shared pre-norm block with a gated FFN (not Mamba's mixer-only
    blocks), so every backbone has the same block layout (DESIGN §3)."""

    def __init__(self, config: ModelConfig, options: str | None = None) -> None:
        reject_options("mamba2", options)
        super().__init__(config, options, [Mamba2Layer(config) for _ in range(config.n_layers)])
