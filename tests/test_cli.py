"""The ``tsfm`` command line (tsfm/cli.py), run in-process through ``main([...])``.

The forecasting tests swap the model for a small fake (``tsfm.forecast.resolve_model`` is patched) so they test
the command, not a model; ``info`` and one forecast also run on a tiny real checkpoint loaded by path.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from tsfm import forecast as forecast_module
from tsfm.cli import COMMANDS, main
from tsfm.config import ModelConfig


class FakeForecaster(torch.nn.Module):
    """Forecaster interface; every quantile repeats the last observed value (plus a level-dependent offset)."""

    def __init__(self) -> None:
        super().__init__()
        self.config = ModelConfig(patch_size=4, context_length=64, train_horizon_patches=12)
        self.weight = torch.nn.Parameter(torch.zeros(1))

    @property
    def quantile_levels(self) -> tuple[float, ...]:
        return self.config.quantile_levels

    def forecast(self, context: torch.Tensor, prediction_length: int) -> torch.Tensor:
        last = torch.stack([row[~torch.isnan(row)][-1] for row in context])
        offsets = torch.tensor(self.quantile_levels) - 0.5
        return (last[:, None, None] + offsets[None, :, None]).expand(-1, -1, prediction_length).clone()


@pytest.fixture
def fake_model(monkeypatch) -> FakeForecaster:
    model = FakeForecaster()

    def resolve(name_or_model, device=None):
        if isinstance(name_or_model, str) and name_or_model not in {"default", "fake"}:
            raise FileNotFoundError(f"no checkpoint at {name_or_model}")
        return model

    monkeypatch.setattr(forecast_module, "resolve_model", resolve)
    return model


@pytest.fixture
def data() -> pd.DataFrame:
    frames = [
        pd.DataFrame({
            "item_id": item_id,
            "timestamp": pd.date_range("2024-01-01", periods=30, freq="D"),
            "target": np.sin(np.arange(30) / 3.0) * 10 + 50 * (k + 1),
        })
        for k, item_id in enumerate(["north", "south", "east"])
    ]
    return pd.concat(frames, ignore_index=True)


@pytest.fixture
def csv_file(tmp_path, data) -> Path:
    path = tmp_path / "data.csv"
    data.to_csv(path, index=False)
    return path


def test_commands_are_registered():
    assert {"forecast", "info"} <= set(COMMANDS)


def test_forecast_csv_writes_csv_and_png(fake_model, csv_file, tmp_path, capsys):
    out, png = tmp_path / "out" / "forecast.csv", tmp_path / "plot.png"
    code = main(["forecast", str(csv_file), "-H", "7", "-o", str(out), "--plot", str(png)])
    assert code == 0
    forecast = pd.read_csv(out)
    assert list(forecast.columns[:3]) == ["item_id", "timestamp", "median"]
    assert forecast.groupby("item_id", sort=False).size().to_dict() == {"north": 7, "south": 7, "east": 7}
    assert forecast["timestamp"].iloc[0] == "2024-01-31"
    assert png.stat().st_size > 1000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert "north" in printed and "3 series x 7 steps" in printed


def test_forecast_parquet_with_other_column_names(fake_model, data, tmp_path):
    source = tmp_path / "data.parquet"
    data.rename(columns={"item_id": "unique_id", "timestamp": "ds", "target": "y"}).to_parquet(source)
    out = tmp_path / "forecast.parquet"
    code = main([
        "forecast", str(source), "--prediction-length", "5", "--id-column", "unique_id", "--timestamp-column", "ds",
        "--target", "y", "--quantile-levels", "0.1,0.5,0.9", "--freq", "D", "-o", str(out),
    ])
    assert code == 0
    forecast = pd.read_parquet(out)
    assert list(forecast.columns) == ["unique_id", "ds", "median", "0.1", "0.5", "0.9"]
    assert len(forecast) == 15


@pytest.mark.parametrize(
    ("extra", "message"),
    [(["-H", "0"], "prediction_length must be a positive integer"),
     (["-H", "3", "--target", "sales"], "target='sales'"),
     (["-H", "3", "--freq", "fortnight"], "unknown freq 'fortnight'"),
     (["-H", "3", "--quantile-levels", "0.5,1.5"], "strictly between 0 and 1"),
     (["-H", "3", "--batch-size", "0"], "batch_size"),
     (["-H", "3", "-o", "out.xlsx"], "unsupported output type '.xlsx'"),
     (["-H", "3", "--model", "/no/such/model"], "cannot load model '/no/such/model'")],
)
def test_bad_input_exits_2_with_one_line(fake_model, csv_file, capsys, extra, message):
    code = main(["forecast", str(csv_file), *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and message in err
    assert "Traceback" not in err and err.count("\n") == 1


def test_missing_and_unsupported_files(fake_model, tmp_path, capsys):
    assert main(["forecast", str(tmp_path / "none.csv"), "-H", "3"]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "data.txt").write_text("x")
    assert main(["forecast", str(tmp_path / "data.txt"), "-H", "3"]) == 2
    assert "unsupported file type '.txt'" in capsys.readouterr().err


@pytest.mark.parametrize("separator", [";", "\t", "|"])
def test_csv_delimiter_is_detected(fake_model, data, tmp_path, separator):
    """Spreadsheets in many locales write ';'; read with ',' the file would be one column named 'item_id;...'."""
    source, out = tmp_path / "data.csv", tmp_path / "forecast.csv"
    data.to_csv(source, index=False, sep=separator)
    assert main(["forecast", str(source), "-H", "4", "-o", str(out)]) == 0
    assert pd.read_csv(out).groupby("item_id", sort=False).size().to_dict() == {"north": 4, "south": 4, "east": 4}


def test_warnings_are_one_line_each(fake_model, csv_file, capsys):
    """A freq finer than the data still forecasts, and says so as a 'warning:' line (no Python source line)."""
    assert main(["forecast", str(csv_file), "-H", "3", "--freq", "h"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("warning: freq='h' left ") and "without a row" in err
    assert "predict_df(" not in err and err.count("\n") == 1


def test_irregular_data_names_the_series(fake_model, data, tmp_path, capsys):
    path = tmp_path / "gappy.csv"
    data.drop(index=[35]).to_csv(path, index=False)  # a day missing in 'south'
    assert main(["forecast", str(path), "-H", "3"]) == 2
    assert "series 'south' has irregular timestamps" in capsys.readouterr().err
    assert main(["forecast", str(path), "-H", "3", "--freq", "D"]) == 0


def test_argparse_errors_return_2(capsys):
    assert main(["forecast"]) == 2
    assert main(["forecast", "x.csv", "-H", "3", "--quantile-levels", "a,b"]) == 2
    assert "comma-separated numbers" in capsys.readouterr().err
    assert main([]) == 2
    assert main(["--help"]) == 0


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> Path:
    from tsfm.checkpoint import save_model
    from tsfm.model import Forecaster

    config = ModelConfig(backbone="transformer", d_model=32, n_layers=2, n_heads=2, context_length=128)
    return save_model(Forecaster(config), tmp_path_factory.mktemp("models") / "tiny")


def test_info_on_a_real_checkpoint(tiny_checkpoint, capsys):
    assert main(["info", "--model", str(tiny_checkpoint)]) == 0
    printed = capsys.readouterr().out
    for expected in ("tsfm", "backbone", "transformer", "parameters", "config.patch_size", "torch", "backbones"):
        assert expected in printed


def test_forecast_with_a_real_checkpoint(tiny_checkpoint, csv_file, tmp_path):
    out = tmp_path / "f.csv"
    assert main(["forecast", str(csv_file), "-H", "4", "--model", str(tiny_checkpoint), "-o", str(out)]) == 0
    assert len(pd.read_csv(out)) == 12


def test_info_with_a_missing_model_still_prints_the_machine(capsys):
    assert main(["info", "--model", "/no/such/model"]) == 2
    captured = capsys.readouterr()
    assert "torch" in captured.out and captured.err.startswith("error: cannot load model")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("xlstm[3:1],mamba2,gdn", ["xlstm[3:1]", "mamba2", "gdn"]),
     ("xlstm[1:0,conv], gdn[neg_eigval] ,xlstm[3:1,conv]", ["xlstm[1:0,conv]", "gdn[neg_eigval]", "xlstm[3:1,conv]"]),
     ("xlstm[1:0,conv]", ["xlstm[1:0,conv]"]), (",mamba2,,", ["mamba2"]), ("", [])],
)
def test_backbone_lists_keep_commas_inside_brackets(text: str, expected: list[str]) -> None:
    from tsfm.cli import split_specs
    from tsfm.pipelines.state_tracking.cli import _names

    assert split_specs(text) == expected
    assert _names(text) == expected  # tsfm tasks run --backbones


def test_sweep_plans_an_xlstm_conv_run_with_a_folder_safe_name() -> None:
    from tsfm.cli import split_specs
    from tsfm.pipelines.sweep import plan_runs

    runs = plan_runs(split_specs("xlstm[1:0,conv],xlstm[1:0]"), ["1M"])
    assert [run.backbone for run in runs] == ["xlstm[1:0,conv]", "xlstm[1:0]"]
    assert [run.name for run in runs] == ["xlstm_1_0_conv-1M-s0", "xlstm_1_0-1M-s0"]


def test_forecast_allow_negative_keeps_the_negative_quantiles(tmp_path):
    """The default model clamps never-negative series at 0 (infer_nonnegative); --allow-negative turns it off."""
    from tsfm.checkpoint import save_model
    from tsfm.model import Forecaster

    torch.manual_seed(0)
    config = ModelConfig(backbone="gdn", d_model=32, n_layers=2, n_heads=2, context_length=128,
                         infer_nonnegative=True)
    checkpoint = save_model(Forecaster(config), tmp_path / "nonnegative")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"item_id": "a", "timestamp": pd.date_range("2024-01-01", periods=64, freq="D"),
                          "target": np.abs(rng.normal(0.0, 5.0, size=64))})  # near 0, widely spread
    frame.to_csv(tmp_path / "data.csv", index=False)
    outputs = {}
    for name, extra in (("clamped", []), ("allowed", ["--allow-negative"])):
        out = tmp_path / f"{name}.csv"
        args = ["forecast", str(tmp_path / "data.csv"), "-H", "16", "--model", str(checkpoint), "-o", str(out)]
        assert main(args + extra) == 0
        outputs[name] = pd.read_csv(out).select_dtypes("number")
    assert (outputs["allowed"].to_numpy() < 0).any(), "the test needs negative quantiles without the clamp"
    assert (outputs["clamped"].to_numpy() >= 0).all()
    np.testing.assert_allclose(outputs["clamped"].to_numpy(), outputs["allowed"].clip(lower=0).to_numpy(), rtol=1e-6)
