"""The direction of imports: ``serving, pipelines -> tsfm core -> kernels`` (DESIGN.md, "The house").

Every module under ``tsfm/`` is parsed (``ast``, nothing imported, so it never skips for a missing extra) and
each of its imports of ``tsfm.*`` (absolute or relative, at any depth, inside functions too) is checked against
the layer rules. A positive control feeds the same checker a module that breaks each rule.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tsfm"

# layer -> layers it must not import
FORBIDDEN = {
    "kernels": ("core", "pipelines", "serving"),
    "core": ("pipelines", "serving"),
    "pipelines": ("serving",),
    "serving": ("pipelines",),
}


def layer_of(module: str) -> str:
    """``tsfm.kernels.ops`` -> kernels; ``tsfm.forecast`` -> core."""
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ("kernels", "pipelines", "serving"):
        return parts[1]
    return "core"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Every ``tsfm`` module named by an import statement of ``source``, relative imports resolved."""
    found = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from tsfm import pipelines` names a sub-package through the alias
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name == "tsfm" or name.startswith("tsfm.")]


def violations(source: str, module: str, is_package: bool = False) -> list[str]:
    """``module:line imports name (layer -> layer)`` for every import against the rules."""
    own = layer_of(module)
    out = []
    for line, name in imported_modules(source, module, is_package):
        target = layer_of(name)
        if target in FORBIDDEN[own]:
            out.append(f"{module}:{line} imports {name} ({own} -> {target})")
    return out


def all_modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_layer_imports_only_downwards() -> None:
    modules = all_modules()
    assert len(modules) > 50, f"found only {len(modules)} modules under {PACKAGE}: the scan is looking elsewhere"
    layers = {layer_of(module_name(path)) for path in modules}
    assert layers == {"core", "kernels", "pipelines", "serving"}
    found = []
    for path in modules:
        found += violations(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py")
    assert not found, "imports against the direction serving, pipelines -> core -> kernels:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("module", "source", "is_package"),
    [
        ("tsfm.kernels.ops", "from tsfm.forecast import predict", False),
        ("tsfm.kernels.triton.mlstm", "from ....model import Forecaster", True),
        ("tsfm.forecast", "import tsfm.pipelines.train", False),
        ("tsfm.cli", "def f():\n    from tsfm.serving.server import run\n", False),
        ("tsfm.cli", "from tsfm import pipelines", False),
        ("tsfm.pipelines.report", "from tsfm.serving import app", False),
        ("tsfm.serving.app", "from ..pipelines.evaluate import evaluate", False),
    ],
)
def test_the_check_catches_each_kind_of_violation(module: str, source: str, is_package: bool) -> None:
    """Positive control: each rule, absolute, relative and function-level imports are all seen."""
    assert len(violations(source, module, is_package)) == 1


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("tsfm.serving.app", "from tsfm.forecast import predict\nfrom tsfm.kernels import ops"),
        ("tsfm.pipelines.train", "from ..model import Forecaster\nfrom .data import corpus"),
        ("tsfm.forecast", "from tsfm.kernels.ops import mlstm\nimport numpy"),
        ("tsfm.kernels.ops", "from .reference import mlstm\nfrom tsfm.kernels.triton import ssd"),
    ],
)
def test_downward_imports_pass(module: str, source: str) -> None:
    assert violations(source, module) == []
