"""GraphedPatchStep (the per-patch stream update in a CUDA graph) and the benchmark that times it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils import _pytree as pytree

from tsfm import graphed_step
from tsfm.config import ModelConfig
from tsfm.graphed_step import GraphedPatchStep
from tsfm.model import Forecaster
from tsfm.patching import patch_tokens
from tsfm.stream import StreamError, open_stream

REPO = Path(__file__).resolve().parents[1]
P = 8


#: The CUDA tests capture a graph of real kernels. Under Triton's interpreter (tests/conftest.py sets
#: ``TRITON_INTERPRET=1`` unless it is set already) a kernel launch copies its CUDA arguments to the host, which
#: graph capture forbids; on a GPU machine run them as ``TRITON_INTERPRET=0 pytest tests/test_graphed_step.py``.
needs_cuda_and_compiled_triton = pytest.mark.skipif(
    not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1",
    reason="needs CUDA: captures a CUDA graph of compiled Triton kernels (on a GPU, run with TRITON_INTERPRET=0)",
)


def tiny(backbone: str) -> Forecaster:
    torch.manual_seed(0)
    config = ModelConfig(backbone=backbone, d_model=32, n_layers=2, n_heads=2, patch_size=P, chunk_size=4,
                         context_length=256, train_horizon_patches=2)
    return Forecaster(config).eval()


def opened_state(model: Forecaster, batch: int) -> tuple[torch.Tensor, object]:
    context = torch.randn(batch, 6, P, device=model.device)
    with torch.no_grad():
        return model.backbone(model.embed(patch_tokens(context)), return_state=True)


def eager(model: Forecaster, patches: torch.Tensor, state: object) -> tuple[torch.Tensor, object]:
    """The library's path (``Stream._advance`` for one patch at a time)."""
    with torch.no_grad():
        for values in patches:
            hidden, state = model.continue_state(model.embed(patch_tokens(values[:, None])), state)
    return hidden[:, 0], state


def patches_with_nan(count: int, batch: int, device: torch.device | str = "cpu") -> torch.Tensor:
    values = torch.randn(count, batch, P, device=device)
    values[0, 0, 2:5] = float("nan")
    values[1, -1] = float("nan")  # a fully missing patch
    return values


def test_refuses_a_cpu_model():
    model = tiny("mamba2")
    _, state = opened_state(model, 2)
    with pytest.raises(ValueError, match=r"needs a model on a CUDA device, got one on cpu.*model\.to\('cuda'\)"):
        GraphedPatchStep(model, state)


class _EagerReplay:
    """Stands in for the CUDA graph on CPU: replaying runs the captured function and writes its static output."""

    def __init__(self, step: GraphedPatchStep, hidden: torch.Tensor) -> None:
        self.step, self.hidden = step, hidden

    def replay(self) -> None:
        self.hidden.copy_(self.step._update())


@pytest.fixture
def graph_run_eagerly(monkeypatch):
    """GraphedPatchStep on the CPU: no CUDA check, and 'replaying' runs the captured function (_EagerReplay)."""

    def capture(self, device):
        hidden = torch.zeros(self.batch_size, self.model.config.d_model)
        return _EagerReplay(self, hidden), hidden

    monkeypatch.setattr(graphed_step, "require_cuda", lambda device: None)
    monkeypatch.setattr(GraphedPatchStep, "_capture", capture)


@pytest.mark.parametrize("spec", ["xlstm[1:1]", "xlstm[1:1,conv]", "mamba2"])
def test_captured_work_advances_the_static_state_like_eager(spec, graph_run_eagerly):
    """What the graph records (embed, step, copy of the new state into the static buffers), run without a GPU:
    consecutive calls continue from the buffers and match the eager path; a new state restarts from it; a wrong
    batch size is refused."""
    model = tiny(spec)
    _, state = opened_state(model, 3)
    patches = patches_with_nan(4, 3)
    step = GraphedPatchStep(model, state)
    for reuse in range(2):  # the second pass reloads the opened state into the advanced buffers
        hidden, carried = step(patches[0], state)
        for values in patches[1:]:
            hidden, carried = step(values, carried)
        assert carried is step.state
        expected, expected_state = eager(model, patches, state)
        torch.testing.assert_close(hidden, expected, msg=f"pass {reuse}")
        for got, want in zip(pytree.tree_leaves(carried), pytree.tree_leaves(expected_state), strict=True):
            torch.testing.assert_close(got, want)
    with pytest.raises(ValueError, match="captured for batch size 3"):
        step(patches[0, :2], None)
    _, other = opened_state(model, 2)
    with pytest.raises(ValueError, match="captured for batch size 3"):
        step(patches[0], other)


@pytest.mark.parametrize("spec", ["xlstm[1:1]", "gdn"])
def test_a_stream_with_cuda_graphs_forecasts_as_the_eager_stream(spec, graph_run_eagerly):
    """``Stream(..., cuda_graphs=True)`` with the graph's work run eagerly (as above): one-patch updates of every
    series go through the graphed step and its reused buffers, other updates (partial, several patches, some series)
    take the eager path; forecasts and snapshots equal those of a stream without graphs all along."""
    model = tiny(spec)
    rng = np.random.default_rng(0)
    context = [rng.normal(size=n).astype(np.float32) for n in (70, 45, 90)]
    graphed, plain = open_stream(model, context, cuda_graphs=True), open_stream(model, context)
    updates = [[P, P, P], [P, P, P], [3, P, 2 * P], [P - 3, 0, 0], [P, P, P], [2 * P, 2 * P, 2 * P], [P, P, P]]
    for sizes in updates:
        values = [rng.normal(size=n).astype(np.float32) for n in sizes]
        graphed.update(values)
        plain.update(values)
        np.testing.assert_allclose(graphed.forecast(2 * P)[1], plain.forecast(2 * P)[1], rtol=1e-5, atol=1e-5)
    assert graphed._graphed is not None  # the graphed path was taken
    for key, value in plain.state_dict().items():
        torch.testing.assert_close(graphed.state_dict()[key], value, rtol=1e-5, atol=1e-5, msg=key)


def test_cuda_graphs_are_refused_without_a_gpu_and_for_the_transformer():
    with pytest.raises(StreamError, match=r"cuda_graphs: .*needs a model on a CUDA device"):
        open_stream(tiny("mamba2"), [np.ones(40, dtype=np.float32)], cuda_graphs=True)
    with pytest.raises(StreamError, match="keeps no fixed-size state"):
        open_stream(tiny("transformer"), [np.ones(40, dtype=np.float32)], cuda_graphs=True)


def saved_tiny(folder: Path) -> Path:
    """A checkpoint folder of an ``xlstm[3:1]`` model with patches of 32 and context 512 (random weights)."""
    from tsfm.checkpoint import save_model

    torch.manual_seed(0)
    config = ModelConfig(backbone="xlstm[3:1]", d_model=32, n_layers=4, n_heads=2, chunk_size=4, patch_size=32,
                         context_length=512)
    return save_model(Forecaster(config).eval(), folder)


def test_benchmark_runs_on_cpu(tmp_path):
    out = tmp_path / "rows.json"
    model = str(saved_tiny(tmp_path / "tiny"))
    cmd = [sys.executable, "-m", "benchmarks.stream_gpu", "--device", "cpu", "--models", model, "--batch-sizes",
           "2", "--updates", "3", "--warmup", "1", "--out", str(out)]
    env = os.environ | {"OMP_NUM_THREADS": "1"}  # tiny matrices: more threads only contend on a busy machine
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    assert f"| {model} | xlstm[3:1] |" in done.stdout and "n/a" in done.stdout
    report = json.loads(out.read_text())
    (row,) = report["rows"]
    assert row["model"] == model and row["batch"] == 2 and row["eager_us"] > 0 and row["graph_us"] is None
    assert report["machine"]["device"] == "cpu"


def test_benchmark_needs_cuda_or_device_cpu():
    if torch.cuda.is_available():
        pytest.skip("CUDA is available: the no-CUDA exit cannot be seen here")
    done = subprocess.run([sys.executable, "-m", "benchmarks.stream_gpu"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert "no CUDA device" in done.stderr and "--device cpu" in done.stderr


def test_benchmark_model_names(tmp_path):
    from benchmarks.stream_gpu import build_model

    assert build_model(str(saved_tiny(tmp_path / "tiny")), torch.device("cpu")).config.context_length == 512
    model = build_model("mamba2", torch.device("cpu"))
    assert model.config.backbone == "mamba2" and not model.training


@needs_cuda_and_compiled_triton
@pytest.mark.parametrize("spec", ["xlstm[1:1]", "xlstm[1:1,conv]", "gdn"])
def test_graphed_matches_eager_on_cuda(spec):
    model = tiny(spec).cuda()
    _, state = opened_state(model, 4)
    patches = patches_with_nan(5, 4, "cuda")
    step = GraphedPatchStep(model, state)
    hidden, carried = step(patches[0], state)
    for values in patches[1:]:
        hidden, carried = step(values, carried)
    expected, expected_state = eager(model, patches, state)
    torch.testing.assert_close(hidden, expected, rtol=1e-4, atol=1e-5)
    for got, want in zip(pytree.tree_leaves(carried), pytree.tree_leaves(expected_state), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


@needs_cuda_and_compiled_triton
def test_a_stream_with_cuda_graphs_matches_the_eager_stream_on_cuda():
    model = tiny("xlstm[1:1]").cuda()
    rng = np.random.default_rng(0)
    context = [rng.normal(size=n).astype(np.float32) for n in (70, 45, 90)]
    graphed, plain = open_stream(model, context, cuda_graphs=True), open_stream(model, context)
    for sizes in ([P, P, P], [3, P, 2 * P], [P - 3, 0, 0], [P, P, P], [P, P, P]):
        values = [rng.normal(size=n).astype(np.float32) for n in sizes]
        graphed.update(values)
        plain.update(values)
        np.testing.assert_allclose(graphed.forecast(2 * P)[1], plain.forecast(2 * P)[1], rtol=1e-4, atol=1e-4)
    assert graphed._graphed is not None
