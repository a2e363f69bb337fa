"""Pieces shared by every backbone: norms, the gated FFN, the short causal conv, the pre-norm residual block and
``BlockStack``, the backbone base that stacks blocks.

A backbone module then only defines its sequence *mixer* (a :class:`Mixer`: ``forward`` / ``init_state`` /
``step``) and hands a list of them to ``BlockStack``; everything around the mixer (norms, FFN, residuals, final
norm, state plumbing) is written once here, so the backbones differ only where the science differs (DESIGN §3).

Initialisation (nanoGPT/GPT-2 style, the same for all backbones so comparisons are fair): projections
``N(0, 0.02)``, projections that write into the residual stream ``N(0, 0.02 / sqrt(2 n_layers))``, biases zero
unless a mixer sets gate biases, norm weights one.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from tsfm.backbones.registry import Backbone, State
from tsfm.config import ModelConfig

INIT_STD = 0.02


def init_linear(layer: nn.Linear, std: float = INIT_STD) -> None:
    """Normal init of a projection's weight, zero bias."""
    nn.init.normal_(layer.weight, mean=0.0, std=std)
    if layer.bias is not None:
        nn.init.zeros_(layer.bias)


def residual_out_std(config: ModelConfig) -> float:
    """Init std of projections that add into the residual stream: scaled down so the stream's variance at init does
    not grow with depth (2 writes per block: mixer and FFN)."""
    return INIT_STD / math.sqrt(2 * config.n_layers)


DT_MIN, DT_MAX, DT_FLOOR = 1e-3, 1e-1, 1e-4
A_INIT_RANGE = (1.0, 16.0)


def inverse_softplus(y: torch.Tensor) -> torch.Tensor:
    """``x`` with ``softplus(x) = y`` (for ``y > 0``)."""
    return y + torch.log(-torch.expm1(-y))


def init_dt_bias(n_heads: int) -> torch.Tensor:
    """Bias so that ``softplus(dt_bias)`` is log-uniform in ``[DT_MIN, DT_MAX]``: heads start at time scales from
    ten to a thousand tokens (Mamba's init)."""
    dt = torch.exp(torch.rand(n_heads) * (math.log(DT_MAX) - math.log(DT_MIN)) + math.log(DT_MIN))
    return inverse_softplus(dt.clamp(min=DT_FLOOR))


def init_a_log(n_heads: int) -> torch.Tensor:
    """``A_log = log(A)``, ``A ~ U[1, 16]``: the per-head decay rate ``exp(-A dt)`` (Mamba-2; GDN uses the same)."""
    return torch.log(torch.empty(n_heads).uniform_(*A_INIT_RANGE))


def state_dtype(dtype: torch.dtype) -> torch.dtype:
    """dtype of recurrent states for a given activation dtype: float32, or float64 for float64 activations."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _rms_normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    """``x / rms(x)`` over the last dim, computed in at least float32 (bf16 sums of squares lose too much)."""
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


class RMSNorm(nn.Module):
    """Root-mean-square norm over the last dim with a learned per-channel gain (no bias, no mean subtraction)."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _rms_normalize(x, self.eps) * self.weight


class MultiHeadRMSNorm(nn.Module):
    """RMS norm of each head's vector separately (``[..., H, D]``, normalised over ``D``), gain per channel.

    Recurrent mixers' per-head outputs have very different scales (e.g. an mLSTM head with a small normalizer);
    normalising each head on its own keeps one head from drowning the others (xLSTM's multi-head norm, GDN's o_norm).
    """

    def __init__(self, n_heads: int, head_dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(n_heads, head_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _rms_normalize(x, self.eps) * self.weight


class GatedFFN(nn.Module):
    """SwiGLU feed-forward: ``W_out(silu(W_gate x) * W_up x)`` with hidden width ``config.ffn_hidden``."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.hidden = config.ffn_hidden
        self.w_in = nn.Linear(config.d_model, 2 * self.hidden, bias=False)  # gate and up, one GEMM
        self.w_out = nn.Linear(self.hidden, config.d_model, bias=False)
        init_linear(self.w_in)
        init_linear(self.w_out, residual_out_std(config))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.w_in(x).split(self.hidden, dim=-1)
        return self.w_out(F.silu(gate) * up)


class CausalConv1d(nn.Module):
    """Short causal depthwise convolution over time (Mamba-2, Gated DeltaNet) with a streaming state.

    The state is the last ``kernel_size - 1`` inputs ``[B, kernel_size - 1, C]`` (zeros before the sequence
    starts), so ``forward`` over two pieces with the state carried equals ``forward`` over the whole. Returns the
    pre-activation; callers apply their nonlinearity.
    """

    def __init__(self, channels: int, kernel_size: int) -> None:
        super().__init__()
        self.channels = channels
        self.kernel_size = kernel_size
        self.weight = nn.Parameter(torch.empty(channels, kernel_size))  # weight[:, -1] taps the current token
        self.bias = nn.Parameter(torch.empty(channels))
        bound = 1.0 / math.sqrt(kernel_size)  # PyTorch's Conv1d default for a depthwise conv (fan_in = kernel)
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def init_state(self, batch_size: int, *, device: torch.device | str | None, dtype: torch.dtype) -> torch.Tensor:
        return torch.zeros(batch_size, self.kernel_size - 1, self.channels, device=device, dtype=dtype)

    def forward(
        self, x: torch.Tensor, state: torch.Tensor | None = None, return_state: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x [B, T, C]`` -> ``(y [B, T, C], state | None)``."""
        batch, length, _ = x.shape
        if state is None:
            state = self.init_state(batch, device=x.device, dtype=x.dtype)
        padded = torch.cat([state.to(x.dtype), x], dim=1)  # [B, K-1+T, C]
        y = F.conv1d(padded.transpose(1, 2), self.weight.unsqueeze(1), self.bias, groups=self.channels)
        return y.transpose(1, 2), (padded[:, length:] if return_state else None)

    def step(self, x_t: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x_t [B, C]`` -> ``(y_t [B, C], state)``."""
        window = torch.cat([state.to(x_t.dtype), x_t.unsqueeze(1)], dim=1)  # [B, K, C]
        y = torch.einsum("bkc,ck->bc", window, self.weight) + self.bias
        return y, window[:, 1:]


class Mixer(nn.Module, abc.ABC):
    """A sequence mixer ``[B, T, d] -> [B, T, d]`` (causal) with a streaming form; the part of a block that moves
    information along time. Unlike :class:`Backbone`, ``forward`` always returns a pair (output, state or None)."""

    @abc.abstractmethod
    def forward(
        self, x: torch.Tensor, state: State | None = None, return_state: bool = False
    ) -> tuple[torch.Tensor, State | None]: ...

    @abc.abstractmethod
    def init_state(self, batch_size: int, *, device: torch.device | str | None, dtype: torch.dtype) -> State: ...

    @abc.abstractmethod
    def step(self, x_t: torch.Tensor, state: State) -> tuple[torch.Tensor, State]: ...


class ResidualBlock(nn.Module):
    """Pre-norm residual block: ``x + mixer(norm(x))``, then ``x + ffn(norm(x))``."""

    def __init__(self, config: ModelConfig, mixer: Mixer) -> None:
        super().__init__()
        self.mixer_norm = RMSNorm(config.d_model)
        self.mixer = mixer
        self.ffn_norm = RMSNorm(config.d_model)
        self.ffn = GatedFFN(config)

    def forward(
        self, x: torch.Tensor, state: State | None = None, return_state: bool = False
    ) -> tuple[torch.Tensor, State | None]:
        h, state = self.mixer(self.mixer_norm(x), state, return_state)
        x = x + h
        return x + self.ffn(self.ffn_norm(x)), state

    def step(self, x_t: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        h, state = self.mixer.step(self.mixer_norm(x_t), state)
        x_t = x_t + h
        return x_t + self.ffn(self.ffn_norm(x_t)), state

    def start_as_identity(self) -> None:
        """Zero the projections that write into the residual stream (the mixer's ``out_proj``, the FFN's ``w_out``):
        the block then passes its input through unchanged until it learns otherwise, so a model grown in depth
        starts out computing its parent's function."""
        with torch.no_grad():
            for layer in (self.mixer.out_proj, self.ffn.w_out):
                layer.weight.zero_()
                if layer.bias is not None:
                    layer.bias.zero_()


class BlockStack(Backbone):
    """Backbone made of residual blocks around the given mixers, then a final RMSNorm.

    The state is a tuple with one mixer state per block (the FFNs are pointwise and hold none).
    """

    def __init__(self, config: ModelConfig, options: str | None, mixers: Sequence[Mixer]) -> None:
        super().__init__(config, options)
        self.blocks = nn.ModuleList(ResidualBlock(config, mixer) for mixer in mixers)
        self.norm = RMSNorm(config.d_model)

    def forward(
        self, x: torch.Tensor, state: State | None = None, return_state: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, State]:
        self._check_input(x, "x", 3)
        states = self._check_state(state) if state is not None else (None,) * len(self.blocks)
        new_states = []
        for block, block_state in zip(self.blocks, states, strict=True):
            x, block_state = block(x, block_state, return_state)
            new_states.append(block_state)
        y = self.norm(x)
        return (y, tuple(new_states)) if return_state else y

    def init_state(
        self, batch_size: int, *, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> State:
        reference = next(self.parameters())
        device = reference.device if device is None else device
        dtype = reference.dtype if dtype is None else dtype
        return tuple(block.mixer.init_state(batch_size, device=device, dtype=dtype) for block in self.blocks)

    def step(self, x_t: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        self._check_input(x_t, "x_t", 2)
        new_states = []
        for block, block_state in zip(self.blocks, self._check_state(state), strict=True):
            x_t, block_state = block.step(x_t, block_state)
            new_states.append(block_state)
        return self.norm(x_t), tuple(new_states)

    def _check_input(self, x: torch.Tensor, what: str, ndim: int) -> None:
        if x.dim() != ndim or x.shape[-1] != self.d_model:
            want = "[B, T, d_model]" if ndim == 3 else "[B, d_model]"
            raise ValueError(f"{self.spec}: {what} must be {want} with d_model={self.d_model}, got {tuple(x.shape)}")

    def _check_state(self, state: State) -> Sequence[State]:
        if not isinstance(state, (tuple, list)) or len(state) != len(self.blocks):
            raise ValueError(f"{self.spec}: state must hold one entry per block ({len(self.blocks)}); "
                             "make it with init_state() or forward(..., return_state=True)")
        return state
