"""The training-loop profile (``tsfm train --profile-steps``): it covers the steps asked for, its numbers add up,
and it leaves the run's trajectory alone."""

from __future__ import annotations

import re

import pytest
import torch
from safetensors.torch import load_file

from tsfm.cli import main
from tsfm.pipelines.step_profile import _union_us, parse_profile_steps

TINY = ["--steps", "6", "--batch-size", "4", "--context-length", "64", "--pool-size", "32", "--preset", "1M",
        "--backbone", "transformer", "--accelerator", "cpu", "--val-every", "100", "--checkpoint-every", "100",
        "--seed", "3"]


def test_parse_profile_steps():
    assert parse_profile_steps("500:20") == (500, 20)
    for bad in ("500", "500:", ":20", "-1:5", "1:2:3", "5:0", "5:201"):
        with pytest.raises(ValueError):
            parse_profile_steps(bad)


def test_union_of_kernel_intervals_counts_overlap_once():
    assert _union_us([]) == 0
    assert _union_us([(0, 10), (5, 15), (20, 25)]) == 20
    assert _union_us([(0, 100), (10, 20), (30, 40)]) == 100  # nested kernels of another stream


def test_a_profiled_run_writes_its_summary_and_trains_the_same(tmp_path, capsys):
    assert main(["train", "--out", str(tmp_path / "plain"), *TINY]) == 0
    assert main(["train", "--out", str(tmp_path / "profiled"), *TINY, "--profile-steps", "2:3"]) == 0
    capsys.readouterr()
    text = (tmp_path / "profiled" / "profile.md").read_text()
    assert text.startswith("# Where the step time went: steps 2-4 (3 steps, torch.profiler)")
    wall = float(re.search(r"\| wall \| ([0-9.]+) ms", text).group(1))
    assert wall > 0
    assert "| GPU busy | no GPU in this run |" in text  # a CPU run says so instead of a number
    assert "aten::" in text  # the host operators' table
    assert not (tmp_path / "plain" / "profile.md").exists()

    def weights(run):
        tensors = {}
        for shard in sorted((tmp_path / run / "model").glob("*.safetensors")):
            tensors.update(load_file(shard))
        return tensors

    plain, profiled = weights("plain"), weights("profiled")
    assert plain.keys() == profiled.keys()
    assert all(torch.equal(plain[name], profiled[name]) for name in plain)


def test_a_run_that_ends_inside_the_profile_writes_what_it_profiled(tmp_path, capsys):
    assert main(["train", "--out", str(tmp_path / "run"), *TINY, "--profile-steps", "4:50"]) == 0
    capsys.readouterr()
    assert (tmp_path / "run" / "profile.md").read_text().startswith("# Where the step time went: steps 4-5 (2 steps")


def test_a_synchronising_call_is_charged_to_the_outermost_operator_above_it():
    from types import SimpleNamespace

    from tsfm.pipelines.step_profile import _outermost_operator

    def event(name, parent=None):
        return SimpleNamespace(name=name, cpu_parent=parent)

    step = event("training_step")
    item = event("aten::item", step)
    dense = event("aten::_local_scalar_dense", item)
    assert _outermost_operator(event("cudaMemcpyAsync", dense)) == "aten::item"
    assert _outermost_operator(event("cudaStreamSynchronize", step)) == "training_step"  # no operator above it
    assert _outermost_operator(event("cudaStreamSynchronize")) == "(none)"


def test_only_kernels_count_as_gpu_work_not_the_ranges_record_function_marks():
    """The optimizer's ``record_function`` range lies on the GPU's timeline over the whole step; counted as a kernel,
    the GPU looked busy 100% of the time (forty-fifth session)."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    from tsfm.pipelines.step_profile import gpu_kernels

    kernel = SimpleNamespace(device_type=DeviceType.CUDA, is_user_annotation=False, name="gemm")
    annotation = SimpleNamespace(device_type=DeviceType.CUDA, is_user_annotation=True, name="Optimizer.step#AdamW.step")
    host = SimpleNamespace(device_type=DeviceType.CPU, is_user_annotation=False, name="aten::mm")
    assert gpu_kernels([kernel, annotation, host]) == [kernel]
