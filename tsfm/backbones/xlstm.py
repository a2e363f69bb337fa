"""xLSTM backbone ``"xlstm[a:b]"``: of every ``a + b`` blocks the first ``a`` are mLSTM and the last ``b`` sLSTM.

``xlstm[3:1]`` (the default, also plain ``"xlstm"``) puts sLSTM in blocks 4, 8, ... (indices 3, 7, ...);
``[1:0]`` is all mLSTM, ``[0:1]`` all sLSTM (TiRex-like), ``[1:1]`` alternates starting with mLSTM.
Both cells are DESIGN §3's stabilised exponential-gating forms, run by ``tsfm.kernels.ops``; this module only projects
inputs to the ops' arguments and their outputs back to the residual stream.

Options after the ratio, comma-separated: ``xlstm[a:b,conv]`` gives every mLSTM layer the xLSTM paper's short causal
depthwise convolution (width ``config.conv_kernel``, as Mamba-2 and Gated DeltaNet here): ``q, k`` and the gates read
``silu(conv(x))``, ``v`` and the output gate read ``x`` (see :class:`MLSTMLayer`). Without it the mLSTM layer follows
xLSTM-7B, which dropped the conv; ``xlstm[a:b]`` and ``xlstm`` build exactly the modules they always did, so saved
checkpoints load unchanged. sLSTM layers have no conv either way. With options the ratio must be written out
(``xlstm[3:1,conv]``, not ``xlstm[conv]``) so each model has one spelling in run names and preset tables, and
``conv`` needs ``a >= 1`` (with no mLSTM block it would change nothing).
"""

from __future__ import annotations

import math
import re

import torch
import torch.nn.functional as F
from torch import nn

from tsfm.backbones.blocks import (
    BlockStack,
    CausalConv1d,
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
OPTIONS = ("conv",)  # flags that may follow the ratio, e.g. "xlstm[1:0,conv]"
_RATIO_RE = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")


class MLSTMLayer(Mixer):
    """mLSTM mixer (matrix memory): per head ``q, k, v`` in ``R^{d/H}``, scalar input and forget gate
    pre-activations, the ``mlstm`` op, per-head RMS norm, output gate ``sigmoid(W_o x)``, output projection.

    Without ``conv`` (the default) this is xLSTM-7B's layout: everything is projected from the block input ``x``
    (``q, k, v, o`` in one GEMM), and the state is the ``mlstm`` op's ``(C, n, m)``.

    With ``conv`` it is the xLSTM paper's mLSTM block (Beck et al. 2024, without its up-projection, block-diagonal
    ``q, k, v`` projections, learnable skip and swish output gate): ``c = silu(CausalConv1d(x))`` over the ``d``
    channels of ``x``; ``q, k`` are projected from ``c`` and ``v, o`` from ``x`` (one GEMM per input); the state is
    ``(conv_state [B, K-1, d], (C, n, m))`` like Mamba-2's ``(conv_state, ssm_state)``. The input and forget gate
    pre-activations are projected from ``c`` too. (The official xLSTM code feeds its gates ``cat(q, k, v)``, a
    linear function of both ``c`` and ``x``.) ``c`` is chosen because the gates decide when, and how strongly, the
    key ``k(c)`` is written: reading the same few-token window as the key lets a write be triggered by local shape
    (a slope, the phase of a short season) rather than by one noisy token, which is what the option is for; it also
    keeps the gates one small GEMM on one input, as without the conv. Without the conv ``c = x`` and both readings
    agree.

    Gate init follows the xLSTM paper: forget bias ``linspace(3, 6)`` over heads (``sigmoid`` 0.95-0.998, so
    every head starts with long memory, at different lengths), input bias ``N(0, 0.1)``. The conv keeps
    :class:`CausalConv1d`'s init (PyTorch's depthwise ``Conv1d`` default, as the xLSTM code).
    """

    def __init__(self, config: ModelConfig, conv: bool = False) -> None:
        super().__init__()
        d, heads = config.d_model, config.n_heads
        self.n_heads, self.head_dim, self.chunk_size = heads, config.head_dim, config.chunk_size
        # The modules are created (and the RNG drawn) in the same order as before the conv option existed, so a
        # seeded ``xlstm[a:b]`` initialises to the same numbers and old checkpoints keep their parameter names.
        self.conv: CausalConv1d | None = None
        if conv:
            self.conv = CausalConv1d(d, config.conv_kernel)
            self.qk_proj = nn.Linear(d, 2 * d, bias=False)  # q, k from c = silu(conv(x)), one GEMM
            self.vo_proj = nn.Linear(d, 2 * d, bias=False)  # v and output gate o from x, one GEMM
            projections: tuple[nn.Linear, ...] = (self.qk_proj, self.vo_proj)
        else:
            self.in_proj = nn.Linear(d, 4 * d, bias=False)  # q, k, v and output gate o, one GEMM
            projections = (self.in_proj,)
        self.gate_proj = nn.Linear(d, 2 * heads)  # input and forget gate pre-activations per head (from c)
        self.norm = MultiHeadRMSNorm(heads, self.head_dim)
        self.out_proj = nn.Linear(d, d, bias=False)
        for layer in projections:
            init_linear(layer)
        init_linear(self.gate_proj)
        init_linear(self.out_proj, residual_out_std(config))
        with torch.no_grad():
            self.gate_proj.bias[:heads].normal_(0.0, 0.1)
            self.gate_proj.bias[heads:].copy_(torch.linspace(3.0, 6.0, heads))

    def _project(self, x: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Block input ``x [..., d]`` and conv branch ``c [..., d]`` (``x`` itself without the conv) ->
        ``q, k, v, o [..., H, D]`` and ``i, f [..., H]``."""
        if self.conv is None:
            q, k, v, o = self.in_proj(x).unflatten(-1, (4, self.n_heads, self.head_dim)).unbind(-3)
        else:
            q, k = self.qk_proj(c).unflatten(-1, (2, self.n_heads, self.head_dim)).unbind(-3)
            v, o = self.vo_proj(x).unflatten(-1, (2, self.n_heads, self.head_dim)).unbind(-3)
        i, f = self.gate_proj(c).unflatten(-1, (2, self.n_heads)).unbind(-2)
        return q, k, v, o, i, f

    def _output(self, h: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
        # cast: the step op may hand back its float32 state dtype for bf16 inputs
        return self.out_proj((self.norm(h.to(o.dtype)) * torch.sigmoid(o)).flatten(-2))

    def _split_state(self, state: State | None) -> tuple[torch.Tensor | None, State | None]:
        """``(conv_state, mlstm_state)``; without the conv the state is the bare mLSTM state (old checkpoints'
        streams hold that)."""
        if self.conv is None:
            return None, state
        return (None, None) if state is None else state

    def _join_state(self, conv_state: torch.Tensor | None, cell_state: State) -> State:
        return cell_state if self.conv is None else (conv_state, cell_state)

    def forward(
        self, x: torch.Tensor, state: State | None = None, return_state: bool = False
    ) -> tuple[torch.Tensor, State | None]:
        conv_state, cell_state = self._split_state(state)
        c = x
        if self.conv is not None:
            c, conv_state = self.conv(x, conv_state, return_state)
            c = F.silu(c)
        q, k, v, o, i, f = self._project(x, c)
        h, cell_state = ops.mlstm(q, k, v, i, f, initial_state=cell_state, output_final_state=return_state,
                                  chunk_size=self.chunk_size)
        return self._output(h, o), (self._join_state(conv_state, cell_state) if return_state else None)

    def init_state(self, batch_size: int, *, device: torch.device | str | None, dtype: torch.dtype) -> State:
        cell_state = ops.mlstm_init_state(batch_size, self.n_heads, self.head_dim, self.head_dim, device=device,
                                          dtype=state_dtype(dtype))
        # the conv state holds past inputs, so it stays in the activation dtype (as Mamba-2's and GDN's)
        conv_state = None if self.conv is None else self.conv.init_state(batch_size, device=device, dtype=dtype)
        return self._join_state(conv_state, cell_state)

    def step(self, x_t: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        conv_state, cell_state = self._split_state(state)
        c_t = x_t
        if self.conv is not None:
            c_t, conv_state = self.conv.step(x_t, conv_state)
            c_t = F.silu(c_t)
        q, k, v, o, i, f = self._project(x_t, c_t)
        h, cell_state = ops.mlstm_step(q, k, v, i, f, cell_state)
        return self._output(h, o), self._join_state(conv_state, cell_state)


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


def parse_options(options: str | None) -> tuple[tuple[int, int], frozenset[str]]:
    """``"a:b[,flag...]"`` -> ``((a, b), {flags})``; ``None`` -> the default ``((3, 1), {})``.

    The ratio comes first and is required whenever flags are given; flags are from :data:`OPTIONS`, each at most
    once. Every error names the spec.
    """
    spec = format_spec("xlstm", options)
    ratio_text, *flags = [part.strip() for part in (DEFAULT_RATIO if options is None else options).split(",")]
    match = _RATIO_RE.match(ratio_text)
    if match is None:
        if ratio_text in OPTIONS:
            raise ValueError(f"backbone spec {spec!r}: options need the block ratio first, e.g. "
                             f"'xlstm[3:1,{ratio_text}]' (the default ratio is {DEFAULT_RATIO})")
        raise ValueError(f"backbone spec {spec!r}: options must be 'a:b' with non-negative integers "
                         "(a mLSTM then b sLSTM blocks per group), optionally followed by ',conv', "
                         "e.g. 'xlstm[3:1]' or 'xlstm[3:1,conv]'")
    n_mlstm, n_slstm = int(match.group(1)), int(match.group(2))
    if n_mlstm + n_slstm == 0:
        raise ValueError(f"backbone spec {spec!r}: a + b must be positive")
    for flag in flags:
        if flag not in OPTIONS:
            raise ValueError(f"backbone spec {spec!r}: unknown option {flag!r} after the ratio; 'xlstm[a:b,...]' "
                             f"takes {', '.join(OPTIONS)}")
    if len(set(flags)) != len(flags):
        raise ValueError(f"backbone spec {spec!r}: an option is repeated")
    if "conv" in flags and n_mlstm == 0:
        raise ValueError(f"backbone spec {spec!r}: 'conv' applies to mLSTM blocks and a = 0 has none; "
                         f"use 'xlstm[{n_mlstm}:{n_slstm}]'")
    return (n_mlstm, n_slstm), frozenset(flags)


def parse_ratio(options: str | None) -> tuple[int, int]:
    """``"a:b"`` (or ``"a:b,flag..."``) -> ``(a, b)``; ``None`` -> the default ``(3, 1)``."""
    return parse_options(options)[0]


def block_layout(n_layers: int, n_mlstm: int, n_slstm: int) -> tuple[str, ...]:
    """Mixer kind per block: in each group of ``a + b`` blocks the first ``a`` are ``"mlstm"``, the rest
    ``"slstm"`` (so sLSTM ends each group)."""
    return tuple("mlstm" if index % (n_mlstm + n_slstm) < n_mlstm else "slstm" for index in range(n_layers))


@register_backbone("xlstm")
class XLSTMBackbone(BlockStack):
    """mLSTM/sLSTM stack; ``block_types`` lists the mixer kind of each block, ``mlstm_conv`` whether the mLSTM blocks
    have the short causal conv."""

    def __init__(self, config: ModelConfig, options: str | None = None) -> None:
        ratio, flags = parse_options(options)
        conv = "conv" in flags
        layout = block_layout(config.n_layers, *ratio)
        super().__init__(config, options, [MLSTMLayer(config, conv=conv) if kind == "mlstm" else SLSTMLayer(config)
                                           for kind in layout])
        self.ratio = ratio
        self.mlstm_conv = conv
        self.block_types = layout
