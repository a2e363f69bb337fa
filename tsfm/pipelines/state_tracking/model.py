"""The token classifier of the state-tracking suite: token embedding -> a registered backbone -> per-position logits.

The backbone is built by :func:`tsfm.backbones.build_backbone` from a spec string (``"xlstm[1:1]"``, ``"mamba2"``,
``"gdn[neg_eigval]"``, ``"transformer"``, ...), exactly as the forecaster builds it, so the suite tests the very
mixers, kernels and blocks that forecast; only the input (token ids instead of patches) and the output (class
logits instead of quantiles) differ. Every backbone gets the same :class:`ModelSize` (same width, depth and heads),
so a difference between backbones is a difference of sequence mixers. Kernels dispatch by device
(:mod:`tsfm.kernels.ops`): Triton on CUDA, the PyTorch reference on CPU.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from tsfm.backbones import build_backbone
from tsfm.backbones.blocks import INIT_STD
from tsfm.config import ModelConfig


@dataclass(frozen=True)
class ModelSize:
    """Width, depth and heads shared by every backbone of a grid. The default (d=64, 2 blocks, 2 heads of 32) is
    small enough to train many models side by side, and 2 blocks let ``xlstm[1:1]`` hold one mLSTM and one sLSTM."""

    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 2
    ffn_mult: float = 2.0
    chunk_size: int = 64

    def backbone_config(self, backbone: str) -> ModelConfig:
        """The ModelConfig the backbone registry builds ``backbone`` from (its forecasting fields stay default)."""
        return ModelConfig(backbone=backbone, **asdict(self))


class TokenClassifier(nn.Module):
    """``tokens [B, T] -> logits [B, T, num_classes]``, causal: the logits at ``t`` see tokens ``0 .. t`` only."""

    def __init__(self, backbone: str, vocab_size: int, num_classes: int, size: ModelSize | None = None) -> None:
        super().__init__()
        size = size or ModelSize()
        if vocab_size < 1 or num_classes < 2:
            raise ValueError(f"need vocab_size >= 1 and num_classes >= 2, got {vocab_size} and {num_classes}")
        self.embed = nn.Embedding(vocab_size, size.d_model)
        self.backbone = build_backbone(size.backbone_config(backbone))
        self.head = nn.Linear(size.d_model, num_classes)
        nn.init.normal_(self.embed.weight, 0.0, INIT_STD)
        nn.init.normal_(self.head.weight, 0.0, INIT_STD)
        nn.init.zeros_(self.head.bias)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.dim() != 2:
            raise ValueError(f"tokens must be [batch, time], got shape {tuple(tokens.shape)}")
        return self.head(self.backbone(self.embed(tokens)))
