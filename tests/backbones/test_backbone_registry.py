"""Specs, the registry and option parsing: layouts of xLSTM ratios, errors that name the spec, and that a new
backbone is one decorated class."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from tsfm.backbones import (
    BACKBONES,
    BlockStack,
    Mixer,
    available_backbones,
    build_backbone,
    parse_backbone_spec,
    register_backbone,
    reject_options,
)
from tsfm.backbones.xlstm import MLSTMLayer, SLSTMLayer, XLSTMBackbone
from tsfm.config import ModelConfig


def tiny(spec: str, n_layers: int = 2, **changes: object) -> ModelConfig:
    return ModelConfig(backbone=spec, d_model=16, n_heads=2, n_layers=n_layers, chunk_size=4, **changes)


def test_builtin_backbones_are_registered() -> None:
    assert {"xlstm", "mamba2", "gdn", "transformer"} <= set(available_backbones())
    assert available_backbones() == sorted(available_backbones())


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("xlstm[3:1]", ("xlstm", "3:1")), ("mamba2", ("mamba2", None)), (" gdn[neg_eigval] ", ("gdn", "neg_eigval")),
     ("xlstm[ 1 : 1 ]", ("xlstm", "1 : 1"))],
)
def test_parse_backbone_spec(spec: str, expected: tuple[str, str | None]) -> None:
    assert parse_backbone_spec(spec) == expected


@pytest.mark.parametrize("spec", ["", "xlstm[3:1", "xlstm[]", "xlstm[3:1][1:1]", "[3:1]", "x lstm", "xlstm(3:1)"])
def test_malformed_spec(spec: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(spec))):
        parse_backbone_spec(spec)
    with pytest.raises(ValueError, match=re.escape(repr(spec))):
        build_backbone(tiny(spec))


@pytest.mark.parametrize("spec", ["xlstm[3]", "xlstm[a:b]", "xlstm[0:0]", "xlstm[-1:2]", "mamba2[x]", "gdn[foo]",
                                  "transformer[rope]", "nope"])
def test_bad_spec_names_the_spec(spec: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(spec))):
        build_backbone(tiny(spec))


def test_unknown_name_lists_registered_backbones() -> None:
    with pytest.raises(ValueError, match=r"registered backbones: .*gdn.*mamba2.*transformer.*xlstm"):
        build_backbone(tiny("nope"))


@pytest.mark.parametrize(
    ("spec", "n_layers", "slstm_indices"),
    [("xlstm[3:1]", 8, {3, 7}), ("xlstm", 8, {3, 7}), ("xlstm[1:1]", 4, {1, 3}), ("xlstm[1:0]", 4, set()),
     ("xlstm[0:1]", 3, {0, 1, 2}), ("xlstm[2:3]", 5, {2, 3, 4})],
)
def test_xlstm_block_layout(spec: str, n_layers: int, slstm_indices: set[int]) -> None:
    backbone = build_backbone(tiny(spec, n_layers=n_layers))
    assert isinstance(backbone, XLSTMBackbone)
    for index, block in enumerate(backbone.blocks):
        kind = SLSTMLayer if index in slstm_indices else MLSTMLayer
        assert isinstance(block.mixer, kind), f"{spec}: block {index} is {type(block.mixer).__name__}"
        assert backbone.block_types[index] == ("slstm" if index in slstm_indices else "mlstm")


def test_transformer_needs_even_head_dim() -> None:
    with pytest.raises(ValueError, match=re.escape("'transformer'")):
        build_backbone(ModelConfig(backbone="transformer", d_model=6, n_heads=2, n_layers=1))


def test_gdn_neg_eigval_option_doubles_beta() -> None:
    assert build_backbone(tiny("gdn[neg_eigval]")).blocks[0].mixer.beta_scale == 2.0
    assert build_backbone(tiny("gdn")).blocks[0].mixer.beta_scale == 1.0


class CumulativeSum(Mixer):
    """Toy mixer: ``y_t = W sum_{s <= t} x_s`` (causal, state = the running sum)."""

    def __init__(self, config: ModelConfig, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.proj = nn.Linear(config.d_model, config.d_model)

    def forward(self, x, state=None, return_state=False):
        total = x.cumsum(1) + (0 if state is None else state.unsqueeze(1))
        return self.proj(self.scale * total), (total[:, -1] if return_state else None)

    def init_state(self, batch_size, *, device, dtype):
        return torch.zeros(batch_size, self.proj.in_features, device=device, dtype=dtype)

    def step(self, x_t, state):
        state = state + x_t
        return self.proj(self.scale * state), state


def test_register_a_new_backbone_with_one_decorated_class() -> None:
    assert "toy_cumsum" not in BACKBONES
    try:
        @register_backbone("toy_cumsum")
        class ToyBackbone(BlockStack):
            def __init__(self, config: ModelConfig, options: str | None = None) -> None:
                if options not in (None, "half"):
                    reject_options("toy_cumsum", options)
                scale = 0.5 if options == "half" else 1.0
                super().__init__(config, options, [CumulativeSum(config, scale) for _ in range(config.n_layers)])

        assert "toy_cumsum" in available_backbones()
        backbone = build_backbone(tiny("toy_cumsum[half]"))
        assert isinstance(backbone, ToyBackbone) and backbone.name == "toy_cumsum"
        assert backbone.spec == "toy_cumsum[half]" and backbone.blocks[0].mixer.scale == 0.5
        x = torch.randn(2, 5, 16)
        y_full = backbone(x)
        state = backbone.init_state(2)
        steps = []
        for t in range(5):
            y_t, state = backbone.step(x[:, t], state)
            steps.append(y_t)
        torch.testing.assert_close(torch.stack(steps, 1), y_full)
        with pytest.raises(ValueError, match=re.escape("'toy_cumsum[double]'")):
            build_backbone(tiny("toy_cumsum[double]"))
        with pytest.raises(ValueError, match="already registered"):
            register_backbone("toy_cumsum")(type("Other", (ToyBackbone,), {}))
    finally:
        BACKBONES.pop("toy_cumsum", None)
    assert "toy_cumsum" not in available_backbones()


def test_register_rejects_bad_names_and_classes() -> None:
    with pytest.raises(ValueError, match="invalid backbone name"):
        register_backbone("no spaces")
    with pytest.raises(TypeError, match="Backbone subclass"):
        register_backbone("not_a_backbone")(nn.Linear)
    assert "not_a_backbone" not in BACKBONES

