"""The built wheel: one top-level name (``tsfm``), and it works installed outside the checkout.

Builds the wheel offline from a copy of the source (``pip wheel --no-deps --no-build-isolation``: setuptools
comes from the test environment), lists its top-level names, installs it with ``--no-deps`` into a fresh virtual
environment in a temporary folder whose dependencies are borrowed from the test environment's site-packages
through a ``.pth`` path line (no network; the checkout's editable finder is not activated that way), then runs the
installed ``tsfm`` script from that folder: ``--help`` (the sub-commands found through entry points), ``info`` and
a forecast. About 20-40 s on a 2-core machine, so it runs in CI (marked ``slow``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCE_ITEMS = ("pyproject.toml", "README.md", "tsfm")
pytestmark = pytest.mark.slow


def _run(command: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PIP_NO_INDEX"] = "1"  # never the network
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the sources (the build writes build/ and *.egg-info beside its input)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "src"
    source.mkdir()
    for name in SOURCE_ITEMS:
        item = REPO / name
        if item.is_dir():
            shutil.copytree(item, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(item, source / name)
    dist = root / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
          str(source)], cwd=root, env=_clean_env())
    (built,) = dist.glob("tsfm-*.whl")
    return built


def test_the_wheel_installs_only_the_tsfm_namespace(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    top_level = {name.split("/")[0] for name in names}
    dist_info = {name for name in top_level if name.endswith(".dist-info")}
    assert top_level - dist_info == {"tsfm"}, f"top-level names in {wheel.name}: {sorted(top_level)}"
    for expected in ("tsfm/kernels/ops.py", "tsfm/pipelines/cli.py", "tsfm/serving/cli.py",
                     "tsfm/models/default/config.json", "tsfm/serving/page/index.html"):
        assert expected in names
    shipped = Path("tsfm/models/default")
    for shard in sorted(path.name for path in (Path(__file__).parents[1] / shipped).glob("*.safetensors")):
        assert f"{shipped}/{shard}" in names, f"{shard} of the default model is missing from {wheel.name}"
    assert {name.split("/")[2] for name in names if name.startswith("tsfm/models/")} == {"default", "recurrent"}
    (entry_points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(entry_points).decode()
    assert "[tsfm.commands]" in text and "tsfm.pipelines.cli" in text and "tsfm.serving.cli" in text


def test_the_installed_wheel_runs_outside_the_checkout(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                        cwd=tmp_path, env=_clean_env()).strip())
    # the test environment's packages, after the venv's own (so the wheel's tsfm wins)
    (purelib / "zz_test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = _clean_env()
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
         cwd=tmp_path, env=env)

    where = _run([str(python), "-c", "import tsfm; print(tsfm.__file__)"], cwd=tmp_path, env=env)
    assert Path(where.strip()).is_relative_to(purelib), f"imported {where.strip()}, not the installed wheel"

    script = str(env_dir / "bin" / "tsfm")
    helptext = _run([script, "--help"], cwd=tmp_path, env=env)
    for name in ("forecast", "info", "train", "evaluate", "data", "serve"):
        assert f"    {name}" in helptext

    info = _run([script, "info"], cwd=tmp_path, env=env)
    assert "backbone" in info and "(model not loaded)" not in info

    rng = np.random.default_rng(0)
    timestamps = pd.date_range("2024-01-01", periods=96, freq="h")
    values = 10 + np.sin(np.arange(96) * 2 * np.pi / 24) + 0.1 * rng.standard_normal(96)
    pd.DataFrame({"item_id": "a", "timestamp": timestamps, "target": values}).to_csv(tmp_path / "in.csv",
                                                                                        index=False)
    _run([script, "forecast", "in.csv", "-H", "24", "-o", "out.csv"], cwd=tmp_path, env=env)
    forecast = pd.read_csv(tmp_path / "out.csv")
    assert len(forecast) == 24
    assert forecast["median"].between(7, 13).all(), forecast["median"].describe()
