"""Where the time of one pretraining step goes: GPU time per kernel of forward + backward + AdamW for the full
Forecaster at the pretraining shape, from ``torch.profiler``, grouped into our Triton mixer kernels and the rest.

The issue asks to remove the top bottleneck *outside* our kernels; this says which it is (norms, FFN GEMMs,
casts, the loss, the optimizer, launch gaps).

    python -m benchmarks.profile_train_step [--spec xlstm[3:1]] [--preset 10M] [--batch-size 1024] \
        [--context-length 2048] [--horizon-patches 24] [--top 25] [--out $OUT]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from tsfm.model import Forecaster
from tsfm.presets import preset_config

OUR_KERNELS = ("_mlstm_", "_slstm_", "_ssd_", "_gd_")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="xlstm[3:1]")
    parser.add_argument("--preset", default="10M")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--context-length", type=int, default=2048)
    parser.add_argument("--horizon-patches", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp")))
    args = parser.parse_args()
    torch.manual_seed(0)
    config = preset_config(args.spec, args.preset, context_length=max(2048, args.context_length),
                           train_horizon_patches=args.horizon_patches)
    model = Forecaster(config).cuda().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    context = torch.randn(args.batch_size, args.context_length, device="cuda").cumsum(-1)
    target = torch.randn(args.batch_size, 32 * args.horizon_patches, device="cuda").cumsum(-1) + context[:, -1:]
    hidden = torch.rand(args.batch_size, args.context_length // 32, device="cuda") < 0.15

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model.training_loss(context, target, hidden_patches=hidden)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(args.repeat):
            step()
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    events.sort(key=lambda e: e.self_device_time_total, reverse=True)
    total = sum(e.self_device_time_total for e in events) / args.repeat / 1e3
    ours = sum(e.self_device_time_total for e in events if any(k in e.key for k in OUR_KERNELS)) / args.repeat / 1e3
    lines = [f"{args.spec} {args.preset}, batch {args.batch_size}, context {args.context_length} + "
             f"{args.horizon_patches} patches: GPU time per step {total:.1f} ms, our mixer kernels {ours:.1f} ms "
             f"({ours / total:.0%})", "", "| kernel | ms/step | share | calls/step |", "|---|---|---|---|"]
    for e in events[: args.top]:
        ms = e.self_device_time_total / args.repeat / 1e3
        lines.append(f"| `{e.key[:90]}` | {ms:.2f} | {ms / total:.1%} | {e.count / args.repeat:.0f} |")
    text = "\n".join(lines)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"profile_train_{args.spec.replace('[', '').replace(']', '').replace(':', '')}_{args.preset}.md"
     ).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
