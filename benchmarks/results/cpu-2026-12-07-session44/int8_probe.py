"""Speed of dynamic int8 quantisation of a checkpoint's linear layers on the CPU (forty-fourth session's probe).

    PYTHONPATH=. .venv/bin/python benchmarks/results/cpu-2026-12-07-session44/int8_probe.py \
        runs/tf20-mid-asdefault/model [torchao]

``torchao``: quantise with ``torchao.quantization.quantize_(model, Int8DynamicActivationInt8WeightConfig())`` instead
(torchao 0.18.0, installed beside the project for the probe: ``pip install --no-deps --target DIR torchao==0.18.0``
and ``PYTHONPATH=.:DIR``).

Times ``forecast`` of 256 random-walk series (context 512, horizon 48, 2 threads) in float32 and with PyTorch's
``quantize_dynamic`` (int8 weights, activations quantised per batch), three repeats after a warm-up each, and prints the
median relative change of the quantiles. Speed only: accuracy is the judge's.
"""

from __future__ import annotations

import sys
import time
import warnings

import torch

from tsfm.checkpoint import load_model


def seconds_per_forecast(model: torch.nn.Module, context: torch.Tensor, repeats: int = 3) -> tuple[float, torch.Tensor]:
    with torch.inference_mode():
        model.forecast(context, 48)
        start = time.perf_counter()
        for _ in range(repeats):
            out = model.forecast(context, 48)
    return (time.perf_counter() - start) / repeats, out


def main() -> None:
    warnings.filterwarnings("ignore", category=DeprecationWarning)  # torch.ao.quantization: see the README
    torch.set_num_threads(2)
    torch.manual_seed(0)
    model = load_model(sys.argv[1]).float().eval()
    context = torch.randn(256, 512).cumsum(1)
    plain, reference = seconds_per_forecast(model, context)
    if sys.argv[2:] == ["torchao"]:
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

        quantised = model
        quantize_(quantised, Int8DynamicActivationInt8WeightConfig())
    else:
        quantised = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    fast, approximate = seconds_per_forecast(quantised, context)
    change = ((reference - approximate).abs() / (reference.abs() + 1e-3)).median().item()
    print(f"float32 {plain:.2f} s, int8 dynamic {fast:.2f} s per 256 series: {plain / fast:.2f}x; "
          f"median relative change of the quantiles {change:.3f}")


if __name__ == "__main__":
    main()
