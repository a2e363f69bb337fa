import math

import pytest
import torch
from torch.utils._pytree import tree_leaves

from tsfm.config import ModelConfig
from tsfm.model import REANCHOR_PATCHES, Forecaster, num_parameters
from tsfm.patching import patch_tokens, patchify
from tsfm.scaling import apply_scale, fit_scale, invert_scale

SPECS = ["xlstm[3:1]", "xlstm[1:0]", "xlstm[1:0,conv]", "mamba2", "gdn", "gdn[neg_eigval]", "transformer"]


def tiny(backbone: str = "xlstm[1:1]", **kw) -> Forecaster:
    torch.manual_seed(0)
    config = ModelConfig(backbone=backbone, d_model=32, n_layers=2, n_heads=2, patch_size=8, chunk_size=4,
                         context_length=256, train_horizon_patches=2, **kw)
    return Forecaster(config).eval()


@pytest.mark.parametrize("spec", SPECS)
def test_forecast_shape_sorted_and_finite(spec):
    model = tiny(spec)
    context = torch.randn(3, 45)
    context[1, :20] = float("nan")
    out = model.forecast(context, prediction_length=19)
    assert out.shape == (3, 9, 19)
    assert torch.isfinite(out).all()
    assert (out.diff(dim=1) >= 0).all()


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("decoding", ["masked", "autoregressive"])
def test_a_short_context_is_read_as_training_padded_it(spec, decoding):
    """Training windows always fill the trained context with NaN before a short history, so ``forecast`` reads a
    short context after those missing patches: the same forecast as the context NaN-padded to the trained length
    by hand (the missing patches' state is computed once and shared, not run for every series)."""
    model = tiny(spec, horizon_embedding=True)
    torch.nn.init.normal_(model.horizon.weight, std=0.1)
    context = torch.randn(3, 45).cumsum(-1)
    context[1, :20] = float("nan")
    padded = torch.cat([torch.full((3, 256 - 48), float("nan")), torch.full((3, 3), float("nan")), context], dim=1)
    with torch.no_grad():
        short, by_hand = model.forecast(context, 40, decoding), model.forecast(padded, 40, decoding)
    torch.testing.assert_close(short, by_hand, rtol=1e-4, atol=1e-4)
    with torch.no_grad():  # and it is not the forecast of the context read alone (what inference did before)
        scale = fit_scale(context)
        alone = model.backbone(model._context_tokens(context, scale))[:, -1]
        last, _ = model.read_context(context, scale)
        model.config = model.config.replace(pad_short_contexts=False)  # the earlier reading, kept for the sweep
        unpadded, _ = model.read_context(context, scale)
    assert not torch.allclose(last, alone, atol=1e-3)
    torch.testing.assert_close(unpadded, alone)


def test_the_missing_patches_state_is_kept_until_the_weights_change():
    model = tiny("xlstm[1:1]")
    context = torch.randn(2, 30)
    with torch.no_grad():
        first = model.forecast(context, 8)
        kept = dict(model._missing_states)
        assert model.forecast(context, 8).equal(first) and model._missing_states.keys() == kept.keys()
        for parameter in model.backbone.parameters():  # an in-place write, as an optimizer step makes
            parameter.mul_(1.1)
        changed = model.forecast(context, 8)
    fresh = tiny("xlstm[1:1]")
    fresh.load_state_dict(model.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(changed, fresh.forecast(context, 8))
    assert not torch.allclose(changed, first) and len(model._missing_states) == 1
    with_autograd = tiny("gdn")
    _, state = with_autograd.read_context(context, fit_scale(context))
    assert any(leaf.requires_grad for leaf in tree_leaves(state))
    assert with_autograd._missing_states == {}  # nothing kept: a kept state would carry the autograd graph


@pytest.mark.parametrize("spec", SPECS)
def test_forecast_sees_a_short_history_as_the_training_forward_does(spec):
    """The invariant behind read_context: for a short history, the first forecast patch is what the training
    forward (``training_loss``'s pass over a sampler window, left-padded to the trained width) gives at the last
    context token."""
    model = tiny(spec)
    context = torch.randn(2, 40).cumsum(-1)
    window = torch.cat([torch.full((2, 256 - 40), float("nan")), context], dim=1)  # as the sampler cuts it
    with torch.no_grad():
        out = model(window)
        trained_view = invert_scale(out.quantiles[:, -1].sort(dim=1).values, out.scale)  # [B, Q, P]
        forecast = model.forecast(context, 8)
    torch.testing.assert_close(forecast, trained_view, rtol=1e-4, atol=1e-4)


def test_a_context_as_long_as_training_is_read_as_it_is():
    model = tiny()
    context = torch.randn(2, 256)
    with torch.no_grad():
        scale = fit_scale(context)
        last, _ = model.read_context(context, scale)
        hidden = model.backbone(model._context_tokens(context, scale))
    torch.testing.assert_close(last, hidden[:, -1])


def test_all_nan_context_gives_finite_forecast():
    out = tiny().forecast(torch.full((2, 16), float("nan")), 8)
    assert torch.isfinite(out).all()


def test_forecast_is_scale_and_shift_equivariant():
    model = tiny()
    context = torch.randn(2, 40).cumsum(-1)
    base = model.forecast(context, 12)
    moved = model.forecast(context * 1000.0 + 5e4, 12)
    assert torch.allclose(moved, base * 1000.0 + 5e4, rtol=1e-4, atol=1e-1)


def test_forecast_prefix_is_the_same_for_longer_horizons():
    """One causal pass: asking for more steps must not change the first ones."""
    model = tiny()
    context = torch.randn(2, 40)
    short, long = model.forecast(context, 16), model.forecast(context, 64)
    assert torch.allclose(short, long[..., :16], atol=1e-5)


def test_context_after_forecast_origin_does_not_leak():
    """Changing old context changes the forecast; the model really reads its input."""
    model = tiny()
    context = torch.randn(1, 40)
    changed = context.clone()
    changed[0, 5] += 10
    assert not torch.allclose(model.forecast(context, 8), model.forecast(changed, 8))


def test_training_loss_backward_and_learns():
    model = tiny("xlstm[1:1]").train()
    t = torch.arange(64 + 16, dtype=torch.float32)
    series = torch.sin(2 * math.pi * t / 8).repeat(8, 1) + 0.01 * torch.randn(8, 80)
    context, target = series[:, :64], series[:, 64:]
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = None
    for _ in range(60):
        loss = model.training_loss(context, target, mask_ratio=0.2, max_mask_run=2)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        first = first if first is not None else loss.item()
    assert loss.item() < 0.5 * first
    assert all(p.grad is not None for p in model.parameters())


def test_next_patch_truth_is_the_scaled_patch_after_each_token():
    """Token i (context, then masked future) is scored against patch i + 1 of context + target, scaled by the
    context's fit; the part of the last patch past the target is NaN (not scored)."""
    model = tiny()
    patch = model.config.patch_size
    context, target = torch.randn(3, 4 * patch) * 5 + 2, torch.randn(3, 2 * patch - 3)
    out = model(context, num_future_tokens=1)
    truth = model.next_patch_truth(context, target, out.scale)
    assert truth.shape == (3, 4 - 1 + 2, patch)
    whole = apply_scale(torch.cat([context, target], dim=1), out.scale)
    torch.testing.assert_close(truth.reshape(3, -1)[:, : whole.shape[1] - patch], whole[:, patch:])
    assert torch.isnan(truth[:, -1, -3:]).all() and not torch.isnan(truth[:, -1, :-3]).any()


def test_training_context_must_be_patch_aligned():
    with pytest.raises(ValueError, match="multiple of 8"):
        tiny().training_loss(torch.randn(2, 30), torch.randn(2, 8))


def test_invalid_config_is_rejected():
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="quantile_levels"):
        ModelConfig(quantile_levels=(0.1, 0.1, 0.5))
    with pytest.raises(ValueError, match="unknown ModelConfig field"):
        ModelConfig.from_dict({"d_modle": 3})


def test_horizon_embedding_starts_neutral_then_moves_only_future_patches():
    """Zero-initialised, the horizon embedding changes nothing; once trained it changes the forecasts of the 2nd and
    later future patches (the masked tokens it is added to) and never the 1st, which the last context token makes."""
    plain, with_horizon = tiny(), tiny(horizon_embedding=True)
    with_horizon.load_state_dict(plain.state_dict(), strict=False)
    context = torch.randn(2, 40)
    assert torch.equal(plain.forecast(context, 24), with_horizon.forecast(context, 24))
    with torch.no_grad():
        with_horizon.horizon.weight.normal_()
    moved = with_horizon.forecast(context, 24)
    base = plain.forecast(context, 24)
    assert torch.allclose(moved[..., :8], base[..., :8], atol=1e-6)
    assert not torch.allclose(moved[..., 8:], base[..., 8:], atol=1e-3)


def test_horizon_embedding_is_trained():
    model = tiny(horizon_embedding=True).train()
    loss = model.training_loss(torch.randn(3, 64), torch.randn(3, 16))
    loss.backward()
    assert model.horizon.weight.grad is not None and model.horizon.weight.grad.abs().sum() > 0


def test_num_parameters_counts_every_value_once() -> None:
    assert num_parameters(torch.nn.Linear(3, 4)) == 16
    shared = torch.nn.Linear(2, 2)
    assert num_parameters(torch.nn.Sequential(shared, shared)) == 6, "a shared parameter counts once"
    model = Forecaster(ModelConfig(backbone="transformer", d_model=32, n_layers=1, n_heads=2))
    assert model.num_parameters() == num_parameters(model) == sum(p.numel() for p in model.parameters())


def test_rotary_rotates_each_pair_by_its_position_angle_and_keeps_relative_positions() -> None:
    """RoPE by its definition: channel ``i`` and ``i + D/2`` of position ``p`` turn by ``p * base^(-2i/D)``; so a
    query-key product depends only on the distance between their positions, and norms are kept."""
    from tsfm.backbones.transformer import ROPE_BASE, rotary

    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 8, dtype=torch.float64)
    out = rotary(x, offset=7)
    half = x.shape[-1] // 2
    for p in range(5):
        for i in range(half):
            angle = (7 + p) * ROPE_BASE ** (-2 * i / x.shape[-1])
            a, b = x[..., p, i], x[..., p, i + half]
            assert torch.allclose(out[..., p, i], a * math.cos(angle) - b * math.sin(angle))
            assert torch.allclose(out[..., p, i + half], a * math.sin(angle) + b * math.cos(angle))
    assert torch.allclose(out.norm(dim=-1), x.norm(dim=-1))
    q, k = torch.randn(1, 1, 1, 8, dtype=torch.float64), torch.randn(1, 1, 1, 8, dtype=torch.float64)
    near = (rotary(q, offset=10) * rotary(k, offset=3)).sum()
    far = (rotary(q, offset=1010) * rotary(k, offset=1003)).sum()
    assert torch.allclose(near, far) and not torch.allclose(near, (q * k).sum())


def test_attention_after_a_shared_prefix_equals_the_prefix_copied_for_every_series() -> None:
    """One key set shared by the batch (the fully missing tokens before a short context) gives what copying it
    before every series' own keys and attending causally over the joined set gives; its state, when asked for,
    is that joined set."""
    import torch.nn.functional as F

    from tsfm.backbones.transformer import CausalSelfAttention, attend_after_shared_prefix

    torch.manual_seed(0)
    batch, heads, length, shared, dim = 5, 3, 7, 11, 8
    q, k, v = (torch.randn(batch, heads, length, dim, dtype=torch.float64) for _ in range(3))
    prefix_k, prefix_v = (torch.randn(1, heads, shared, dim, dtype=torch.float64) for _ in range(2))
    keys = torch.cat([prefix_k.expand(batch, -1, -1, -1), k], dim=-2)
    values = torch.cat([prefix_v.expand(batch, -1, -1, -1), v], dim=-2)
    sees = torch.arange(shared + length) <= torch.arange(shared, shared + length)[:, None]
    expected = F.scaled_dot_product_attention(q, keys, values, attn_mask=sees)
    torch.testing.assert_close(attend_after_shared_prefix(q, k, v, prefix_k, prefix_v), expected)

    attention = CausalSelfAttention(tiny("transformer").config).double()
    x = torch.randn(batch, length, 32, dtype=torch.float64)
    cache = tuple(torch.randn(1, 2, shared, 16, dtype=torch.float64) for _ in range(2))  # 2 heads of 16
    y, state = attention(x, cache, return_state=True)
    copied = tuple(leaf.expand(batch, -1, -1, -1).contiguous() for leaf in cache)
    y_copied, state_copied = attention(x, copied, return_state=True)
    torch.testing.assert_close(y, y_copied)
    torch.testing.assert_close(state, state_copied)


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("extra", [{}, {"horizon_embedding": True, "seasonal_hint": True}, {"naive_gate": True}])
def test_masked_decoding_in_one_pass_equals_reading_then_decoding(spec, extra):
    """``forecast`` decodes ``"masked"`` in one backbone pass over the context's tokens and the masked future
    tokens; the same forecast as reading the context with its state kept (``read_context``) and continuing from
    that state (``decode_from_state``), as streams do."""
    model = tiny(spec, **extra)
    if model.horizon is not None:
        torch.nn.init.normal_(model.horizon.weight, std=0.1)
    context = torch.randn(3, 70).cumsum(-1) + 0.5 * torch.sin(torch.arange(70) * 2 * math.pi / 12)
    context[1, :30] = float("nan")
    with torch.no_grad():
        one_pass = model.forecast(context, 40, "masked")
        scale = model.fit_scale(context)
        last, state = model.read_context(context, scale)
        read_then_decoded = model.decode_from_state(last, state, scale, 40, "masked", hint_context=context)
    torch.testing.assert_close(one_pass, read_then_decoded, rtol=1e-4, atol=1e-4)


def _median_path_by_full_passes(model: Forecaster, context: torch.Tensor, horizon: int, every: int) -> torch.Tensor:
    """The definition of the autoregressive median, the slow way: append the median patch and run the whole
    pipeline again, one pass per patch; every ``every`` patches the window keeps its last ``context_length`` steps
    and the scale is fitted again (the model's own centre), in between the scale stays."""
    patch, median, keep = model.config.patch_size, model.quantile_levels.index(0.5), model.config.context_length
    window, scale, steps = context, model.fit_scale(context), []
    for k in range(math.ceil(horizon / patch)):
        if k and k % every == 0:
            window = window[:, -keep:]
            scale = model.fit_scale(window)
        hidden = model.backbone(model.embed(patch_tokens(patchify(apply_scale(window, scale), patch))))
        step = invert_scale(model.head(hidden[:, -1:])[:, 0].sort(dim=1).values[:, median], scale)  # [B, P]
        steps.append(step)
        window = torch.cat([window, step], dim=1)
    return torch.cat(steps, dim=1)[:, :horizon]


@pytest.mark.parametrize("backbone", ["xlstm[1:1]", "xlstm[3:1]", "mamba2", "gdn", "gdn[neg_eigval]", "transformer"])
@pytest.mark.parametrize("horizon_embedding", [False, True])
def test_autoregressive_decoding_feeds_back_the_median_path(backbone: str, horizon_embedding: bool, monkeypatch):
    """The first patch is the same either way; later patches follow the median path fed back patch by patch
    (recurrent steps from the carried state, re-reading the window every REANCHOR_PATCHES, equal a whole pass per
    patch), and each quantile keeps its masked-decoding distance from the median."""
    torch.manual_seed(0)
    model = tiny(backbone, horizon_embedding=horizon_embedding)
    if model.horizon is not None:
        torch.nn.init.normal_(model.horizon.weight)  # zero at initialisation: make it count
    context = torch.randn(2, 250)
    context[0, :7] = float("nan")  # ragged: left padding
    context[:, 100:] += torch.linspace(0, 6, 150)  # a drift, so that re-fitting the scale changes it
    masked = model.forecast(context, 70, decoding="masked")
    median = model.quantile_levels.index(0.5)
    patch = model.config.patch_size
    for every in (1, 3, REANCHOR_PATCHES):
        monkeypatch.setattr("tsfm.model.REANCHOR_PATCHES", every)
        auto = model.forecast(context, 70, decoding="autoregressive")
        assert torch.allclose(masked[..., :patch], auto[..., :patch], atol=1e-5)
        reference = _median_path_by_full_passes(model, context, 70, every)
        torch.testing.assert_close(auto[:, median], reference, atol=1e-4, rtol=1e-4)
        spread = masked - masked[:, median : median + 1]
        assert torch.allclose(auto - auto[:, median : median + 1], spread, atol=1e-4)
        assert not torch.allclose(masked[..., patch:], auto[..., patch:], atol=1e-3)


def test_decoding_is_validated():
    with pytest.raises(ValueError, match="decoding must be one of"):
        ModelConfig(decoding="beam")
    with pytest.raises(ValueError, match="decoding must be one of"):
        tiny().forecast(torch.randn(1, 40), 8, decoding="beam")
    assert tiny(decoding="autoregressive").config.decoding == "autoregressive"


@pytest.mark.parametrize("decoding", ["masked", "autoregressive"])
def test_infer_nonnegative_clamps_only_series_whose_context_has_no_negative_value(decoding):
    model = tiny(decoding=decoding)
    context = torch.randn(3, 40) * 5.0 + 1.0  # spread around 1: the plain forecasts have negative quantiles
    context[0] = context[0].abs()  # never negative: clamped
    context[1] = context[1].abs()
    context[1, 3] = -1e-3  # one negative value: left as it is
    context[2, :30] = float("nan")
    context[2, 30:] = context[2, 30:].abs()  # missing values do not count against it
    plain = model.forecast(context, 20)
    assert (plain < 0).any(dim=(1, 2)).all(), "the test needs negative quantiles in every plain forecast"
    clamped = model.forecast(context, 20, infer_nonnegative=True)
    assert torch.equal(clamped[[0, 2]], plain[[0, 2]].clamp(min=0.0))
    assert torch.equal(clamped[1], plain[1])
    # the config sets the default, and a call overrides it
    configured = tiny(decoding=decoding, infer_nonnegative=True)
    assert torch.equal(configured.forecast(context, 20), clamped)
    assert torch.equal(configured.forecast(context, 20, infer_nonnegative=False), plain)


def test_infer_nonnegative_leaves_an_all_missing_context_alone():
    model = tiny()
    context = torch.full((1, 16), float("nan"))
    assert torch.equal(model.forecast(context, 8, infer_nonnegative=True), model.forecast(context, 8))


def test_infer_nonnegative_must_be_a_bool():
    with pytest.raises(ValueError, match="infer_nonnegative must be true or false"):
        ModelConfig(infer_nonnegative="yes")


def test_pad_short_contexts_must_be_a_bool():
    with pytest.raises(ValueError, match="pad_short_contexts must be true or false"):
        ModelConfig(pad_short_contexts=0)


def test_same_network_ignores_only_the_inference_settings():
    base = ModelConfig()
    assert base.same_network(base.replace(decoding="autoregressive", infer_nonnegative=True,
                                          pad_short_contexts=False))
    assert not base.same_network(base.replace(d_model=256))
    assert not base.same_network(base.replace(horizon_embedding=True))


def test_scale_loc_steps_centres_every_read_on_the_recent_level():
    """A model with ``scale_loc_steps`` reads each context centred on its recent level: the forward pass, the masked
    forecast (the same as a whole-mean model handed that scale) and every autoregressive re-read of the window."""
    torch.manual_seed(0)
    recent = tiny("xlstm[1:1]", scale_loc_steps=40)
    plain = Forecaster(recent.config.replace(scale_loc_steps=None))
    plain.load_state_dict(recent.state_dict())
    context = torch.randn(2, 250)
    context[:, 150:] += 5.0  # a level shift: the recent level is not the mean
    scale = recent(context).scale
    torch.testing.assert_close(scale.loc[:, 0], context[:, -40:].mean(dim=1))
    torch.testing.assert_close(scale, fit_scale(context, 40))
    masked = recent.forecast(context, 70, decoding="masked")
    torch.testing.assert_close(masked, plain.forecast(context, 70, decoding="masked", scale=scale))
    assert not torch.allclose(masked, plain.forecast(context, 70, decoding="masked"), atol=1e-3)
    auto = recent.forecast(context, 200, decoding="autoregressive")
    reference = _median_path_by_full_passes(recent, context, 200, REANCHOR_PATCHES)
    torch.testing.assert_close(auto[:, recent.quantile_levels.index(0.5)], reference, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("value", [0, -3, True, 2.5, "256"])
def test_scale_loc_steps_is_validated(value):
    with pytest.raises(ValueError, match="scale_loc_steps must be a positive integer or null"):
        ModelConfig(scale_loc_steps=value)
