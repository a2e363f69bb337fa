"""Where the raw data lives: the project's shared folder, never the repository.

Raw files are large and under other licences, so they are read in place from ``<repo>/../shared/data/raw`` and
never copied into the repository. ``TSFM_SHARED_DIR`` points elsewhere (a CI checkout, a laptop); an explicit
argument beats both.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["REPO_ROOT", "SHARED_DIR_ENV", "RawDataMissingError", "raw_dir", "raw_file", "shared_dir"]

REPO_ROOT = Path(__file__).resolve().parents[3]
SHARED_DIR_ENV = "TSFM_SHARED_DIR"


class RawDataMissingError(FileNotFoundError):
    """A raw file (or the raw folder) the converters need is not there."""


def shared_dir(shared: str | os.PathLike[str] | None = None) -> Path:
    """The shared folder: the argument, else ``$TSFM_SHARED_DIR``, else ``<repo>/../shared``."""
    if shared is not None:
        return Path(shared)
    env = os.environ.get(SHARED_DIR_ENV)
    if env:
        return Path(env)
    return REPO_ROOT.parent / "shared"


def raw_dir(shared: str | os.PathLike[str] | None = None) -> Path:
    """``<shared>/data/raw`` (it may not exist: converters raise :class:`RawDataMissingError` when they need it)."""
    return shared_dir(shared) / "data" / "raw"


def raw_file(name: str, shared: str | os.PathLike[str] | None = None) -> Path:
    """The path of one raw file, checked to exist."""
    path = raw_dir(shared) / name
    if not path.is_file():
        raise RawDataMissingError(
            f"raw file {path} is missing: put the raw data under <shared>/data/raw or set {SHARED_DIR_ENV}"
        )
    return path
