"""The backbone contract (DESIGN §2), checked for every registered spec on tiny configs: shape, causality, streaming
(step and chunked forward equal one forward, in float64), gradients to every parameter.

Sizes are chosen so the chunkwise kernels cross chunk boundaries with a ragged tail (T = 13, chunk_size = 4) and
every xLSTM variant has both kinds of block where its ratio allows.
"""

from __future__ import annotations

import pytest
import torch

from tsfm.backbones import Backbone, build_backbone
from tsfm.config import ModelConfig

SPECS = ["xlstm[3:1]", "xlstm[1:0]", "xlstm[1:1]", "xlstm[0:1]", "xlstm[1:0,conv]", "xlstm[3:1,conv]", "mamba2", "gdn",
         "gdn[neg_eigval]", "transformer"]
BATCH, LENGTH, D_MODEL = 2, 13, 32
TIGHT = {"rtol": 1e-9, "atol": 1e-9}


def make_backbone(spec: str, *, double: bool = False, seed: int = 0) -> Backbone:
    torch.manual_seed(seed)
    n_layers = 4 if spec.startswith("xlstm") else 2
    config = ModelConfig(backbone=spec, d_model=D_MODEL, n_heads=2, n_layers=n_layers, chunk_size=4, conv_kernel=4)
    backbone = build_backbone(config)
    return backbone.double() if double else backbone


def inputs(dtype: torch.dtype = torch.float64, seed: int = 1) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(BATCH, LENGTH, D_MODEL, generator=generator, dtype=dtype)


def flat_tensors(state: object) -> list[torch.Tensor]:
    if isinstance(state, torch.Tensor):
        return [state]
    if isinstance(state, (tuple, list)):
        return [t for item in state for t in flat_tensors(item)]
    raise TypeError(f"unexpected state leaf {type(state)}")


@pytest.mark.parametrize("spec", SPECS)
def test_output_shape_dtype_and_float32_parameters(spec: str) -> None:
    backbone = make_backbone(spec)
    assert all(p.dtype == torch.float32 for p in backbone.parameters())
    y = backbone(inputs(torch.float32))
    assert y.shape == (BATCH, LENGTH, D_MODEL)
    assert y.dtype == torch.float32
    assert torch.isfinite(y).all()


@pytest.mark.parametrize("spec", SPECS)
def test_causal(spec: str) -> None:
    backbone = make_backbone(spec, double=True)
    x = inputs()
    positions = (0, 6, LENGTH - 1)
    variants = [x]
    for t in positions:  # one batched forward: the original and one copy perturbed at each position
        changed = x.clone()
        changed[:, t] += torch.randn(BATCH, D_MODEL, dtype=torch.float64)
        variants.append(changed)
    with torch.no_grad():
        y, *y_changed = backbone(torch.cat(variants)).split(BATCH)
    for t, y_t in zip(positions, y_changed, strict=True):
        torch.testing.assert_close(y_t[:, :t], y[:, :t], **TIGHT, msg=f"{spec}: output before {t} moved")
        assert (y_t[:, t:] - y[:, t:]).abs().max() > 1e-6, f"{spec}: input at {t} changed no output"


@pytest.mark.parametrize("spec", SPECS)
def test_step_by_step_equals_forward(spec: str) -> None:
    backbone = make_backbone(spec, double=True)
    x = inputs()
    with torch.no_grad():
        y = backbone(x)
        state = backbone.init_state(BATCH)
        steps = []
        for t in range(LENGTH):
            y_t, state = backbone.step(x[:, t], state)
            steps.append(y_t)
    torch.testing.assert_close(torch.stack(steps, dim=1), y, **TIGHT)


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("split", [1, 6])
def test_forward_with_carried_state_equals_one_forward(spec: str, split: int) -> None:
    backbone = make_backbone(spec, double=True)
    x = inputs()
    with torch.no_grad():
        y = backbone(x)
        y_head, state = backbone(x[:, :split], return_state=True)
        y_tail, final = backbone(x[:, split:], state=state, return_state=True)
        _, final_whole = backbone(x, return_state=True)
    torch.testing.assert_close(torch.cat([y_head, y_tail], dim=1), y, **TIGHT)
    for a, b in zip(flat_tensors(final), flat_tensors(final_whole), strict=True):
        torch.testing.assert_close(a, b, **TIGHT)


@pytest.mark.parametrize("spec", SPECS)
def test_prefill_then_step(spec: str) -> None:
    """What a forecast does: one forward over the context, then token by token."""
    backbone = make_backbone(spec, double=True)
    x = inputs()
    split = 7
    with torch.no_grad():
        y = backbone(x)
        _, state = backbone(x[:, :split], return_state=True)
        before = [t.clone() for t in flat_tensors(state)]
        steps = []
        for t in range(split, LENGTH):
            y_t, state = backbone.step(x[:, t], state)
            steps.append(y_t)
    torch.testing.assert_close(torch.stack(steps, dim=1), y[:, split:], **TIGHT)
    # stepping returned new states; the caller's prefill state is untouched
    _, prefill_state = backbone(x[:, :split], return_state=True)
    for a, b in zip(before, flat_tensors(prefill_state), strict=True):
        torch.testing.assert_close(a, b, **TIGHT)


@pytest.mark.parametrize("spec", SPECS)
def test_gradient_reaches_every_parameter(spec: str) -> None:
    backbone = make_backbone(spec)
    x = inputs(torch.float32).requires_grad_(True)
    weights = torch.randn(BATCH, LENGTH, D_MODEL, generator=torch.Generator().manual_seed(2))
    (backbone(x) * weights).sum().backward()
    for name, parameter in backbone.named_parameters():
        assert parameter.grad is not None, f"{spec}: no gradient for {name}"
        assert torch.isfinite(parameter.grad).all(), f"{spec}: non-finite gradient for {name}"
        assert parameter.grad.abs().max() > 0, f"{spec}: zero gradient for {name}"
    assert x.grad is not None and torch.isfinite(x.grad).all()


@pytest.mark.parametrize("spec", ["xlstm[1:1]", "xlstm[1:1,conv]", "mamba2", "gdn", "transformer"])
def test_bad_input_shape_is_a_clear_error(spec: str) -> None:
    backbone = make_backbone(spec)
    with pytest.raises(ValueError, match="d_model=32"):
        backbone(torch.zeros(BATCH, LENGTH, D_MODEL + 1))
    with pytest.raises(ValueError, match="one entry per block"):
        backbone.step(torch.zeros(BATCH, D_MODEL), state=())
