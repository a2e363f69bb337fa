"""The residual MLP used both to embed patches and as the quantile head (TiRex style, DESIGN §2)."""

from __future__ import annotations

import torch
from torch import nn


class ResidualMLP(nn.Module):
    """``Linear2(act(Linear1 x)) + Linear_res(x)``: a nonlinear map with a linear skip, so the identity-like part
    of the mapping is easy to learn and gradients reach the input directly."""

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int) -> None:
        super().__init__()
        self.hidden = nn.Linear(in_dim, hidden_dim)
        self.act = nn.SiLU()
        self.out = nn.Linear(hidden_dim, out_dim)
        self.residual = nn.Linear(in_dim, out_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.act(self.hidden(x))) + self.residual(x)
