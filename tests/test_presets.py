import pytest

from tsfm.presets import PRESET_TARGETS, STANDARD_SPECS, TOLERANCE, config_num_parameters, preset_config


@pytest.mark.parametrize("spec", STANDARD_SPECS)
@pytest.mark.parametrize("preset", list(PRESET_TARGETS))
def test_preset_within_tolerance(spec, preset):
    config = preset_config(spec, preset)
    params = config_num_parameters(config)
    target = PRESET_TARGETS[preset]
    assert abs(params / target - 1) <= TOLERANCE, f"{spec} {preset}: {params:,} vs {target:,}"


def test_same_depth_across_backbones():
    depths = {preset_config(spec, "10M").n_layers for spec in STANDARD_SPECS}
    assert len(depths) == 1


def test_unknown_preset():
    with pytest.raises(ValueError, match="unknown preset"):
        preset_config("mamba2", "5M")


def test_count_is_everything():
    from tsfm.model import Forecaster

    config = preset_config("transformer", "1M")
    assert config_num_parameters(config) == sum(p.numel() for p in Forecaster(config).parameters())


def test_the_20M_preset_fits_the_shipped_models_size_cap():
    """20M is the largest preset whose bf16 weights fit the 40 MiB the repository allows a shipped model (the 10M
    default's successor); every backbone must fit, not only the default's."""
    for spec in STANDARD_SPECS:
        params = config_num_parameters(preset_config(spec, "20M"))
        assert params * 2 <= 40 * 2**20, f"{spec}: {params:,} parameters are {params * 2 / 2**20:.1f} MiB in bf16"


def test_every_preset_has_a_sweep_recipe():
    from tsfm.pipelines.sweep import RECIPES

    assert list(RECIPES) == list(PRESET_TARGETS)
