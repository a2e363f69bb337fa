"""Scale presets: 1M, 3M, 10M, 20M, 40M, 80M parameters for every backbone, matched within ±10% counting everything.

Every backbone at a given preset has the same depth, head width and context; only the model width ``d_model`` and
the FFN width (``ffn_mult``) are chosen per backbone so the *total* parameter count (embedding, backbone, head,
norms) lands on the target. That keeps a scaling sweep a comparison of sequence mixers at equal budget.
The table below was produced by ``python -m tsfm.presets`` (``solve_preset``); specs not in the table (e.g.
``xlstm[2:1]``) are solved on the fly the same way. An ablation flag that only adds a few parameters keeps its base
spec's shape (:func:`shape_spec`: ``xlstm[a:b,conv]`` is sized as ``xlstm[a:b]``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from tsfm.config import ModelConfig

PRESET_TARGETS: dict[str, int] = {"1M": 1_000_000, "3M": 3_000_000, "10M": 10_000_000, "20M": 20_000_000,
                                  "40M": 40_000_000, "80M": 80_000_000}
TOLERANCE = 0.10


@dataclass(frozen=True)
class PresetShape:
    """What is fixed per preset, for every backbone."""

    n_layers: int
    head_dim: int


PRESET_SHAPES: dict[str, PresetShape] = {
    "1M": PresetShape(n_layers=4, head_dim=32),
    "3M": PresetShape(n_layers=8, head_dim=32),
    "10M": PresetShape(n_layers=8, head_dim=64),
    "20M": PresetShape(n_layers=10, head_dim=64),
    "40M": PresetShape(n_layers=12, head_dim=64),
    "80M": PresetShape(n_layers=16, head_dim=64),
}

FFN_MULTS = tuple(1.5 + 0.25 * i for i in range(11))  # 1.5 .. 4.0
PREFERRED_FFN_MULT = 2.5

# (backbone, preset) -> (d_model, ffn_mult); regenerate with `python -m tsfm.presets`.
PRESET_TABLE: dict[tuple[str, str], tuple[int, float]] = {
    ("xlstm[3:1]", "1M"): (128, 2.5),
    ("xlstm[3:1]", "3M"): (160, 3.0),
    ("xlstm[3:1]", "10M"): (320, 2.25),
    ("xlstm[3:1]", "20M"): (384, 2.75),
    ("xlstm[3:1]", "40M"): (576, 1.75),
    ("xlstm[3:1]", "80M"): (640, 2.5),
    ("xlstm[1:0]", "1M"): (128, 2.25),
    ("xlstm[1:0]", "3M"): (160, 2.75),
    ("xlstm[1:0]", "10M"): (320, 2.0),
    ("xlstm[1:0]", "20M"): (384, 2.5),
    ("xlstm[1:0]", "40M"): (576, 1.5),
    ("xlstm[1:0]", "80M"): (640, 2.25),
    ("xlstm[1:1]", "1M"): (128, 2.75),
    ("xlstm[1:1]", "3M"): (192, 1.75),
    ("xlstm[1:1]", "10M"): (320, 2.5),
    ("xlstm[1:1]", "20M"): (384, 3.0),
    ("xlstm[1:1]", "40M"): (576, 2.0),
    ("xlstm[1:1]", "80M"): (576, 3.75),
    ("xlstm[0:1]", "1M"): (128, 3.0),
    ("xlstm[0:1]", "3M"): (192, 2.25),
    ("xlstm[0:1]", "10M"): (384, 1.75),
    ("xlstm[0:1]", "20M"): (384, 3.5),
    ("xlstm[0:1]", "40M"): (704, 1.5),
    ("xlstm[0:1]", "80M"): (832, 1.75),
    ("mamba2", "1M"): (128, 1.75),
    ("mamba2", "3M"): (160, 2.0),
    ("mamba2", "10M"): (256, 3.75),
    ("mamba2", "20M"): (384, 2.25),
    ("mamba2", "40M"): (448, 3.25),
    ("mamba2", "80M"): (576, 2.75),
    ("gdn", "1M"): (128, 1.5),
    ("gdn", "3M"): (160, 1.75),
    ("gdn", "10M"): (256, 3.25),
    ("gdn", "20M"): (320, 3.5),
    ("gdn", "40M"): (448, 2.75),
    ("gdn", "80M"): (576, 2.25),
    ("gdn[neg_eigval]", "1M"): (128, 1.5),
    ("gdn[neg_eigval]", "3M"): (160, 1.75),
    ("gdn[neg_eigval]", "10M"): (256, 3.25),
    ("gdn[neg_eigval]", "20M"): (320, 3.5),
    ("gdn[neg_eigval]", "40M"): (448, 2.75),
    ("gdn[neg_eigval]", "80M"): (576, 2.25),
    ("transformer", "1M"): (128, 2.75),
    ("transformer", "3M"): (160, 3.0),
    ("transformer", "10M"): (320, 2.5),
    ("transformer", "20M"): (384, 3.0),
    ("transformer", "40M"): (512, 2.75),
    ("transformer", "80M"): (576, 3.5),
}


def config_num_parameters(config: ModelConfig) -> int:
    """Total parameters of the Forecaster ``config`` describes, built on the meta device (no memory, no init cost)."""
    from tsfm.model import Forecaster

    with torch.device("meta"):
        return Forecaster(config).num_parameters()


def _config(backbone: str, preset: str, d_model: int, ffn_mult: float, **overrides) -> ModelConfig:
    shape = PRESET_SHAPES[preset]
    return ModelConfig(backbone=backbone, d_model=d_model, n_layers=shape.n_layers,
                       n_heads=d_model // shape.head_dim, ffn_mult=ffn_mult, **overrides)


def shape_spec(backbone: str) -> str:
    """The spec whose preset shape ``backbone`` takes: ``xlstm[a:b,conv]`` -> ``xlstm[a:b]``, any other spec itself.

    The mLSTM conv adds ``(conv_kernel + 1) d`` parameters per mLSTM block (0.03-0.3% of a preset). Solved on its
    own, the variant can land on another width (``xlstm[3:1,conv]`` at 3M: ``d = 192``, ``ffn_mult = 1.5`` against
    ``160``, ``3.0`` for ``xlstm[3:1]``), and an ablation would then compare widths rather than the conv.
    """
    from tsfm.backbones.registry import parse_backbone_spec

    name, options = parse_backbone_spec(backbone)
    if name != "xlstm" or options is None or "," not in options:
        return backbone
    from tsfm.backbones.xlstm import parse_options

    (n_mlstm, n_slstm), _ = parse_options(options)  # a bad spec fails here, naming itself
    return f"xlstm[{n_mlstm}:{n_slstm}]"


def solve_preset(backbone: str, preset: str) -> tuple[int, float]:
    """Search ``(d_model, ffn_mult)`` so the total parameter count is closest to the preset's target.

    ``d_model`` runs over multiples of the preset's head width (so heads stay kernel-friendly) and ``ffn_mult``
    over 1.5-4.0; ties are broken towards the usual FFN width.
    """
    target, head_dim = PRESET_TARGETS[preset], PRESET_SHAPES[preset].head_dim
    best, best_cost = None, math.inf
    for d_model in range(head_dim, 4096 + 1, head_dim):
        smallest = config_num_parameters(_config(backbone, preset, d_model, FFN_MULTS[0]))
        if smallest > target * (1 + TOLERANCE):
            break
        for mult in FFN_MULTS:
            params = config_num_parameters(_config(backbone, preset, d_model, mult))
            cost = abs(math.log(params / target)) + 0.01 * abs(mult - PREFERRED_FFN_MULT)
            if cost < best_cost:
                best, best_cost = (d_model, mult), cost
    if best is None:
        raise ValueError(f"no width fits {backbone} into the {preset} preset")
    return best


def preset_config(backbone: str, preset: str, **overrides) -> ModelConfig:
    """The ModelConfig of ``backbone`` at scale ``preset`` (``"1M"``, ``"3M"``, ``"10M"``, ``"20M"``, ``"40M"``,
    ``"80M"``).

    ``overrides`` set other fields (context_length, chunk_size, ...); they must not change the parameter count.
    """
    if preset not in PRESET_TARGETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(PRESET_TARGETS)}")
    base = shape_spec(backbone)
    d_model, ffn_mult = PRESET_TABLE.get((base, preset)) or solve_preset(base, preset)
    return _config(backbone, preset, d_model, ffn_mult, **overrides)


STANDARD_SPECS = ("xlstm[3:1]", "xlstm[1:0]", "xlstm[1:1]", "xlstm[0:1]", "mamba2", "gdn", "gdn[neg_eigval]",
                  "transformer")


def main() -> None:
    """Print the preset table (paste it into PRESET_TABLE) and the resulting counts."""
    lines = []
    for spec in STANDARD_SPECS:
        for preset in PRESET_TARGETS:
            d_model, mult = solve_preset(spec, preset)
            params = config_num_parameters(_config(spec, preset, d_model, mult))
            lines.append(f"    ({spec!r}, {preset!r}): ({d_model}, {mult}),  # {params:,} "
                         f"({params / PRESET_TARGETS[preset] - 1:+.1%})")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
