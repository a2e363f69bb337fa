"""``scripts/probe_scale_center.py``: the recent-level centre, and the runner that puts it under a command."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import torch

from tsfm.scaling import fit_scale

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("probe_scale_center", ROOT / "scripts" / "probe_scale_center.py")
probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe)


def test_the_centre_is_the_last_patch_and_the_spread_is_unchanged():
    nan = float("nan")
    step = torch.cat([torch.zeros(64), torch.full((32,), 6.0)])
    with_gap = step.clone()
    with_gap[-8:] = nan  # the centre is taken over the observed values of the last patch
    empty_tail = torch.cat([torch.arange(64.0), torch.full((32,), nan)])  # nothing observed there: the mean stays
    context = torch.stack([step, with_gap, empty_tail])
    recent, plain = probe.fit_recent_scale(context), fit_scale(context)
    assert recent.loc[:, 0].tolist() == [6.0, 6.0, 31.5]
    assert plain.loc[0, 0] == 2.0  # the whole-context mean the pipeline uses, for contrast
    assert torch.equal(recent.scale, plain.scale)


def test_the_runner_replaces_the_models_scaling_for_the_script_it_runs(tmp_path):
    script = tmp_path / "which.py"
    script.write_text("import tsfm.model, tsfm.scaling\n"
                      "print(tsfm.model.fit_scale.func.__name__, tsfm.model.fit_scale.keywords['recent_steps'], "
                      "tsfm.scaling.fit_scale.__name__)\n")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "probe_scale_center.py"), "--recent-steps", "128",
                           str(script)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    # the model's name is replaced; the scaling module itself (the judge's units) is not
    assert done.stdout.split() == ["fit_recent_scale", "128", "fit_scale"]
