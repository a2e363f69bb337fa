"""Specs, the registry and option parsing: layouts of xLSTM ratios, errors that name the spec, and that a new
backbone is one decorated class."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
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
from tsfm.backbones.blocks import CausalConv1d
from tsfm.backbones.xlstm import MLSTMLayer, SLSTMLayer, XLSTMBackbone, parse_options
from tsfm.config import ModelConfig
from tsfm.kernels import ops


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
                                  "transformer[rope]", "nope", "xlstm[1:0,foo]", "xlstm[conv]", "xlstm[conv,1:0]",
                                  "xlstm[1:0,conv,conv]", "xlstm[1:0,]", "xlstm[1:0,1:1]", "xlstm[0:1,conv]",
                                  "xlstm[0:0,conv]"])
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


@pytest.mark.parametrize(
    ("options", "expected"),
    [(None, ((3, 1), frozenset())), ("1:0", ((1, 0), frozenset())), ("1:0,conv", ((1, 0), frozenset({"conv"}))),
     (" 3 : 1 , conv ", ((3, 1), frozenset({"conv"}))), ("2:3,conv", ((2, 3), frozenset({"conv"})))],
)
def test_xlstm_options(options: str | None, expected: tuple[tuple[int, int], frozenset[str]]) -> None:
    assert parse_options(options) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [("xlstm[conv]", "ratio first, e.g. 'xlstm[3:1,conv]'"), ("xlstm[1:0,foo]", "unknown option 'foo'"),
     ("xlstm[1:0,conv,conv]", "repeated"), ("xlstm[0:1,conv]", "use 'xlstm[0:1]'")],
)
def test_xlstm_option_errors_say_what_to_write(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        build_backbone(tiny(spec))


@pytest.mark.parametrize(("spec", "n_layers"), [("xlstm[1:0,conv]", 3), ("xlstm[3:1,conv]", 8), ("xlstm[1:1,conv]", 4)])
def test_xlstm_conv_gives_every_mlstm_block_a_conv(spec: str, n_layers: int) -> None:
    backbone = build_backbone(tiny(spec, n_layers=n_layers, conv_kernel=3))
    assert backbone.mlstm_conv and backbone.spec == spec
    plain = build_backbone(tiny(spec.replace(",conv", ""), n_layers=n_layers, conv_kernel=3))
    assert backbone.block_types == plain.block_types
    for block, kind in zip(backbone.blocks, backbone.block_types, strict=True):
        if kind == "mlstm":
            assert isinstance(block.mixer.conv, CausalConv1d)
            assert (block.mixer.conv.channels, block.mixer.conv.kernel_size) == (16, 3)
        else:
            assert isinstance(block.mixer, SLSTMLayer) and not hasattr(block.mixer, "conv")
    n_mlstm = backbone.block_types.count("mlstm")
    extra = sum(p.numel() for p in backbone.parameters()) - sum(p.numel() for p in plain.parameters())
    assert extra == n_mlstm * (3 + 1) * 16  # depthwise weight and bias per mLSTM block; the projections are as big


def test_xlstm_without_conv_keeps_its_parameter_names() -> None:
    """Checkpoints of ``xlstm[a:b]`` (the shipped models) must keep loading: the option adds nothing to them."""
    names = {name for name, _ in build_backbone(tiny("xlstm[1:1]")).blocks[0].mixer.named_parameters()}
    assert names == {"in_proj.weight", "gate_proj.weight", "gate_proj.bias", "norm.weight", "out_proj.weight"}
    assert build_backbone(tiny("xlstm[1:1]")).blocks[0].mixer.conv is None
    conv_names = {name for name, _ in build_backbone(tiny("xlstm[1:1,conv]")).blocks[0].mixer.named_parameters()}
    assert conv_names == {"conv.weight", "conv.bias", "qk_proj.weight", "vo_proj.weight", "gate_proj.weight",
                          "gate_proj.bias", "norm.weight", "out_proj.weight"}


def test_mlstm_conv_layer_is_the_papers_block() -> None:
    """``c = silu(conv(x))`` from a plain zero-padded causal ``F.conv1d``; q, k and the gates from ``c``, v and the
    output gate from ``x``; and the state is ``(conv window, mLSTM state)``."""
    torch.manual_seed(0)
    layer = build_backbone(tiny("xlstm[1:0,conv]", n_layers=1)).blocks[0].mixer.double()
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    kernel = layer.conv.kernel_size
    c = F.silu(F.conv1d(x.transpose(1, 2), layer.conv.weight.unsqueeze(1), layer.conv.bias, padding=kernel - 1,
                        groups=16)[..., :9].transpose(1, 2))
    heads = (2, 8)
    q, k = (w.unflatten(-1, heads) for w in layer.qk_proj(c).chunk(2, dim=-1))
    v, o = (w.unflatten(-1, heads) for w in layer.vo_proj(x).chunk(2, dim=-1))
    i, f = layer.gate_proj(c).chunk(2, dim=-1)
    h, _ = ops.mlstm(q, k, v, i, f, chunk_size=4)
    expected = layer.out_proj((layer.norm(h) * torch.sigmoid(o)).flatten(-2))
    y, (conv_state, cell_state) = layer(x, return_state=True)
    torch.testing.assert_close(y, expected, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(conv_state, x[:, -(kernel - 1):])  # the last K - 1 inputs
    assert len(cell_state) == len(layer.init_state(2, device=None, dtype=torch.float64)[1]) == 3
    # without the conv the state stays the bare mLSTM state (what streaming code of the old specs holds)
    plain = build_backbone(tiny("xlstm[1:0]", n_layers=1)).blocks[0].mixer
    assert len(plain.init_state(2, device=None, dtype=torch.float32)) == 3


def test_mlstm_conv_reads_a_short_window() -> None:
    """With the recurrence cut (forget gate shut), an output depends on its own input and the conv's ``K - 1``
    inputs before it through ``q, k`` and the gates; without the conv, on its own token alone."""
    torch.manual_seed(0)
    for spec, reach in (("xlstm[1:0,conv]", 3), ("xlstm[1:0]", 0)):
        layer = build_backbone(tiny(spec, n_layers=1, conv_kernel=4)).blocks[0].mixer.double()
        with torch.no_grad():
            layer.gate_proj.bias[2:].fill_(-1e4)  # forget pre-activations: f = sigmoid(-1e4) = 0, no memory
        x = torch.randn(1, 10, 16, dtype=torch.float64)
        t = 8
        for lag in range(1, 6):
            moved = x.clone()
            moved[:, t - lag] += 1.0
            change = (layer(moved)[0][:, t] - layer(x)[0][:, t]).abs().max()
            assert (change > 1e-6) == (lag <= reach), f"{spec}: lag {lag} changed output by {change}"


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

