"""xLSTM backbone ``"xlstm[a:b]"``: of every ``a + b`` blocks the first ``a`` are mLSTM and the last ``b`` sLSTM.

``xlstm[3:1]`` (the default, also plain ``"xlstm"``) puts sLSTM in blocks 4, 8, ... (indices 3, 7, ...);
``[1:0]`` is all mLSTM, ``[0:1]`` all sLSTM (TiRex-like), ``[1:1]`` alternates starting with mLSTM.
Both cells are DESIGN §3's stabilised exponential-gating forms, run by ``tsfm.kernels.ops``; this module only projects
inputs to the ops' arguments and their outputs back to the residual stream.
"""

from __future__ import annotations

import math
import re

import torch
from torch import nn

from tsfm.backbones.blocks import (
    BlockStack,
    Mixer,
    MultiHeadRMSNorm,
    init_linear,
    residual_out_std,
    state_dtype,
)
from tsfm.backbones.registry import State, format_spec, register_backbone
from tsfm.config import ModelConfig
from tsfm.kernels import ops

DEFAULT_RATIO = "3:1"
_RATIO_RE = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")


class MLSTMLayer(Mixer):
    """mLSTM mixer (matrix memory, xLSTM-7B layout without the conv): per head ``q, k, v`` in ``R^{d/H}``, scalar
    input and forget gate pre-activations, the ``mlstm`` op, per-head RMS norm, output gate
    ``sigmoid(W_o x)``, output projection.

    Gate init follows the xLSTM paper: forget bias ``linspace(3, 6)`` over heads (``sigmoid`` 0.95-0.998, so
    every head starts with long memory, at different lengths), input bias ``N(0, 0.1)``.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d, heads = config.d_model, config.n_heads
        self.n_heads, self.head_dim, self.chunk_size = heads, config.head_dim, config.chunk_size
        self.in_proj = nn.Linear(d, 4 * d, bias=False)  # q, k, v and output gate o, one GEMM
        self.gate_proj = nn.Linear(d, 2 * heads)  # input and forget gate pre-activations per head
        self.norm = MultiHeadRMSNorm(heads, self.head_dim)
        self.out_proj = nn.Linear(d, d, bias=False)
        init_linear(self.in_proj)
        init_linear(self.gate_proj)
        init_linear(self.out_proj, residual_out_std(config))
        with torch.no_grad():
            self.gate_proj.bias[:heads].normal_(0.0, 0.1)
            self.gate_proj.bias[heads:].copy_(torch.linspace(3.0, 6.0, heads))

    def _project(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``x [..., d]`` -> ``q, k, v, o [..., H, D]`` and ``i, f [..., H]``."""
        q, k, v, o = self.in_proj(x).unflatten(-1, (4, self.n_heads, self.head_dim)).unbind(-3)
        i, f = self.gate_proj(x).unflatten(-1, (2, self.n_heads)).unbind(-2)
        return q, k, v, o, i, f

    def _output(self, h: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
        # cast: the step op may hand back its float32 state dtype for bf16 inputs
        return self.out_proj((self.norm(h.to(o.dtype)) * torch.sigmoid(o)).flatten(-2))

    def forward(
        self, x: torch.Tensor, state: State | None = None, return_state: bool = False
    ) -> tuple[torch.Tensor, State | None]:
        q, k, v, o, i, f = self._project(x)
        h, state = ops.mlstm(q, k, v, i, f, initial_state=state, output_final_state=return_state,
                             chunk_size=self.chunk_size)
        return self._output(h, o), state

    def init_state(self, batch_size: int, *, device: torch.device | str | None, dtype: torch.dtype) -> State:
        return ops.mlstm_init_state(batch_size, self.n_heads, self.head_dim, self.head_dim, device=device,
                                    dtype=state_dtype(dtype))

    def step(self, x_t: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        q, k, v, o, i, f = self._project(x_t)
        h, state = ops.mlstm_step(q, k, v, i, f, state)
        return self._output(h, o), state


class SLSTMLayer(Mixer):
    """sLSTM mixer (scalar memory with recurrent memory mixing): gate pre-activations ``W x + b`` with ``W``
    block-diagonal per head (head ``h`` reads channels ``h*D:(h+1)*D``, as the xLSTM paper's headwise projections),
    recurrent ``R [H, 4, D, D]``, the ``slstm`` op (output gate inside the cell), per-head RMS norm, output
    projection.

    Init: ``W ~ N(0, sqrt(2 / (5 D)))`` (xLSTM's small init for the headwise fan-in ``D``), ``R ~ N(0, 0.1 / sqrt(D))``
    so the recurrence starts close to linear-in-input, forget bias ``linspace(3, 6)`` over each head's units,
    other biases zero.
    """

    GATES = ("i", "f", "z", "o")

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        heads, dim = config.n_heads, config.head_dim
        self.n_heads, self.head_dim = heads, dim
        self.gate_weight = nn.Parameter(torch.empty(heads, 4, dim, dim))  # gates[h, g] = x_h @ W[h, g]
        self.gate_bias = nn.Parameter(torch.zeros(heads, 4, dim))
        self.recurrent = nn.Parameter(torch.empty(heads, 4, dim, dim))  # R: h_{t-1, h} @ R[h, g]
        self.norm = MultiHeadRMSNorm(heads, dim)
        self.out_proj = nn.Linear(config.d_model, config.d_model, bias=False)
        nn.init.normal_(self.gate_weight, 0.0, math.sqrt(2.0 / (5 * dim)))
        nn.init.normal_(self.recurrent, 0.0, 0.1 / math.sqrt(dim))
        with torch.no_grad():
            self.gate_bias[:, 1].copy_(torch.linspace(3.0, 6.0, dim))
        init_linear(self.out_proj, residual_out_std(config))

    def _gates(self, x: torch.Tensor) -> torch.Tensor:
        """``x [..., d]`` -> gate pre-activations ``[..., H, 4, D]`` in order (i, f, z, o)."""
        x = x.unflatten(-1, (self.n_heads, self.head_dim))
        return torch.einsum("...hi,hgio->...hgo", x, self.gate_weight) + self.gate_bias

    def forward(
        self, x: torch.Tensor, state: State | None = None, return_state: bool = False
    ) -> tuple[torch.Tensor, State | None]:
        h, state = ops.slstm(self._gates(x), self.recurrent, initial_state=state, output_final_state=return_state)
        return self.out_proj(self.norm(h.to(x.dtype)).flatten(-2)), state

    def init_state(self, batch_size: int, *, device: torch.device | str | None, dtype: torch.dtype) -> State:
        return ops.slstm_init_state(batch_size, self.n_heads, self.head_dim, device=device, dtype=state_dtype(dtype))

    def step(self, x_t: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        h, state = ops.slstm_step(self._gates(x_t), self.recurrent, state)
        return self.out_proj(self.norm(h.to(x_t.dtype)).flatten(-2)), state


def parse_ratio(options: str | None) -> tuple[int, int]:
    """``"a:b"`` -> ``(a, b)``; ``None`` -> the default ``(3, 1)``."""
    spec = format_spec("xlstm", options)
    match = _RATIO_RE.match(DEFAULT_RATIO if options is None else options)
    if match is None:
        raise ValueError(f"backbone spec {spec!r}: options must be 'a:b' with non-negative integers "
                         "(a mLSTM then b sLSTM blocks per group), e.g. 'xlstm[3:1]'")
    n_mlstm, n_slstm = int(match.group(1)), int(match.group(2))
    if n_mlstm + n_slstm == 0:
        raise ValueError(f"backbone spec {spec!r}: a + b must be positive")
    return n_mlstm, n_slstm


def block_layout(n_layers: int, n_mlstm: int, n_slstm: int) -> tuple[str, ...]:
    """Mixer kind per block: in each group of ``a + b`` blocks the first ``a`` are ``"mlstm"``, the rest
    ``"slstm"`` (so sLSTM ends each group)."""
    return tuple("mlstm" if index % (n_mlstm + n_slstm) < n_mlstm else "slstm" for index in range(n_layers))


@register_backbone("xlstm")
class XLSTMBackbone(BlockStack):
    """mLSTM/sLSTM stack; ``block_types`` lists the mixer kind of each block."""

    def __init__(self, config: ModelConfig, options: str | None = None) -> None:
        ratio = parse_ratio(options)
        layout = block_layout(config.n_layers, *ratio)
        super().__init__(config, options, [MLSTMLayer(config) if kind == "mlstm" else SLSTMLayer(config)
                                           for kind in layout])
        self.ratio = ratio
        self.block_types = layout
