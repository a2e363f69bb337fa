"""The ``tsfm`` sub-commands that make and judge models: train, pack-run, unpack-run, sweep, evaluate, patterns, report,
data.

Found by the top-level command through the ``tsfm.commands`` entry point (or its fallback list in
:mod:`tsfm.cli`); importing this module registers the commands. It imports only the command machinery from the
core; each command imports its heavy modules (Lightning, gluonts, statsforecast) when it runs, so ``tsfm --help``
stays instant and a missing extra is one line naming it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tsfm.cli import DEVICE_ARG, EXIT_OK, CommandError, arg, command, command_group, split_specs
from tsfm.pipelines.state_tracking.cli import register as register_state_tracking_commands

if TYPE_CHECKING:
    from tsfm.config import ModelConfig


@command(
    "train",
    "Pretrain a model on synthetic series and a real corpus (on the GPU when there is one); resumes a run whose "
    "--out already holds a checkpoint. Writes OUT/model (a tsfm checkpoint), OUT/checkpoints, OUT/logs, OUT/loss.png.",
    arg("--backbone", default=None,
        help="registered backbone spec, e.g. xlstm[3:1], mamba2, gdn[neg_eigval] (default: xlstm[3:1])"),
    arg("--preset", default=None, help="scale preset: 1M, 3M, 10M, 20M, 40M or 80M (default: 1M)"),
    arg("--init-from", default=None,
        help="start from this checkpoint's weights (a built-in name or a folder) with a fresh optimizer and "
             "schedule: fine-tuning, or continued pretraining; the model settings come from it"),
    arg("--out", type=Path, required=True, help="run folder (resumed if it holds checkpoints/last.ckpt)"),
    arg("--steps", type=int, default=1000, help="optimizer steps of the whole run (default: 1000)"),
    arg("--batch-size", type=int, default=64, help="windows per step (default: 64)"),
    arg("--learning-rate", type=float, default=1e-3, help="peak AdamW learning rate (default: 1e-3)"),
    arg("--warmup-steps", type=int, default=100, help="linear warm-up steps (default: 100)"),
    arg("--context-length", type=int, default=2048, help="longest training context in steps (default: 2048)"),
    arg("--horizon-patches", type=int, default=None,
        help="future patches scored per window (the model's train_horizon_patches; default: the preset's)"),
    arg("--horizon-embedding", action="store_true",
        help="learned embedding of the horizon index on the masked future tokens (ModelConfig.horizon_embedding)"),
    arg("--seasonal-hint", action="store_true",
        help="give the masked future tokens the Seasonal-Naive values of their patches (ModelConfig.seasonal_hint); "
             "with --init-from, grows that checkpoint's model by the hint's embedding, which starts at zero"),
    arg("--naive-gate", action="store_true",
        help="a learned gate that moves each forecast token's quantiles towards Seasonal Naive "
             "(ModelConfig.naive_gate; masked decoding only); with --init-from, grows that checkpoint's model by "
             "the gate, which starts at zero"),
    arg("--scale-loc-steps", type=int, default=None,
        help="centre each context on the mean of its last N observed steps instead of its whole mean "
             "(ModelConfig.scale_loc_steps); with --init-from, changes that checkpoint's centre and the run adapts "
             "its weights (default: the whole mean, or the --init-from checkpoint's)"),
    arg("--grow-layers", type=int, default=None,
        help="with --init-from: append residual blocks up to this many (the checkpoint's block pattern continued); "
             "they start as the identity, so the grown model starts out computing the checkpoint's function"),
    arg("--grown-lr-scale", type=float, default=1.0,
        help="peak learning rate of the modules grown over --init-from (--seasonal-hint, --naive-gate, "
             "--grow-layers), as a multiple of --learning-rate: they start at zero (default: 1.0)"),
    arg("--mask-ratio", type=float, default=0.15, help="share of context patches hidden in runs (default: 0.15)"),
    arg("--real-data", type=Path, default=None,
        help="GIFT-Eval-format root of real series (e.g. from `tsfm data build-pretrain`, or GiftEvalPretrain)"),
    arg("--validation-share", type=float, default=0.05,
        help="share of whole real series held out for validation and checkpoint choice (default: 0.05)"),
    arg("--validation-split", choices=("series", "covering"), default="series",
        help="series: hold out whole series (default); covering: also the ends of the series of datasets with "
             "fewer than 20 series, so every dataset is in the validation set (tsfm.pipelines.data.corpus)"),
    arg("--max-series-length", type=int, default=None, help="keep the last N steps of longer real series"),
    arg("--upsample-real", default=None, metavar="FREQ=FACTOR,...",
        help="also train on copies of the real training series of each FREQ interpolated onto a grid FACTOR times "
             "finer, as datasets of their own (e.g. H=12,30T=6,10T=2: 5-minute series with real day-to-day "
             "changes; validation untouched; tsfm.pipelines.data.upsample)"),
    arg("--upsample-texture", type=float, default=None, metavar="T",
        help="--upsample-real's finer steps get a Brownian bridge pinned to the observed steps, its spread T times a "
             "random walk's at each interval's pace: a fine sensor's step-to-step texture (default 0: straight "
             "lines; drawn from --seed)"),
    arg("--synthetic-share", type=float, default=None,
        help="share of synthetic windows (default: 1.0 without --real-data, 0.5 with it)"),
    arg("--mixup-prob", type=float, default=0.2, help="share of TSMixup windows (default: 0.2)"),
    arg("--full-context-prob", type=float, default=0.5,
        help="share of windows with the longest context the series offers; the others are cut shorter at random "
             "and left-padded with missing values (default: 0.5; validation windows always use 0.5)"),
    arg("--prior-mix", default=None, metavar="FAMILY=SHARE,...",
        help="change the shares of synthetic families from their defaults, e.g. random_walk=0.2,short=0.15 (0 "
             "drops one; shares are normalised; families: tsfm.pipelines.data.priors.PRIORS)"),
    arg("--pool-size", type=int, default=4096, help="synthetic series kept on the device (default: 4096)"),
    arg("--prior-block", type=int, default=None,
        help="synthetic series made per block (default: 1024, a whole pool refresh of up to 1,024 series in one "
             "block: on a GPU a quarter of the kernel launches of 256, the default before the forty-sixth session, "
             "which a run started with it resumes on; another block draws other series)"),
    arg("--val-every", type=int, default=250, help="steps between validations (default: 250)"),
    arg("--checkpoint-every", type=int, default=250, help="steps between resume checkpoints (default: 250)"),
    arg("--max-minutes", type=float, default=None,
        help="wall-clock budget of this call: stop cleanly, save, resume later with the same command"),
    arg("--seed", type=int, default=0, help="random seed (default: 0)"),
    arg("--precision", default="auto", help="Lightning precision (default: bf16-mixed on a GPU, else 32-true)"),
    arg("--accelerator", default="auto", help="Lightning accelerator: auto, cpu, gpu"),
    arg("--devices", type=int, default=1,
        help="devices trained data-parallel (Lightning DDP, one process each); --batch-size stays the global batch "
             "and must be divisible by N; a run may be resumed on another N (default: 1)"),
    arg("--compile", action=argparse.BooleanOptionalAction, default=None,
        help="torch.compile the loss around the sequence ops (the same math; 1.7-2.0x faster steps at 80M on an "
             "H100, 2x at 10M, after a start-up of tens of seconds); default: on when training on a GPU"),
    arg("--teacher", default=None, metavar="MODEL",
        help="distil from this checkpoint (a built-in name or a folder): the loss also matches its quantiles on "
             "every training window (same patch size and levels; one teacher forward per step)"),
    arg("--distill-weight", type=float, default=None,
        help="the teacher's share of the training loss, in [0, 1] (default: 0.5; with --teacher)"),
    arg("--window-balance", type=float, default=None, metavar="FLOOR",
        help="train on the mean over windows of log(window's pinball loss + FLOOR), each window weighted by its "
             "relative error, instead of the pinball loss pooled over steps (validation too; default: pooled)"),
    arg("--profile-steps", default=None, metavar="FIRST:COUNT",
        help="profile COUNT training steps from step FIRST (or from the resume point) with torch.profiler and write "
             "OUT/profile.md: wall and GPU-busy time per step, synchronising calls, top host operators and "
             "kernels (tsfm.pipelines.step_profile); changes nothing the run computes"),
)
def train_command(args: argparse.Namespace) -> int:
    """Training lives in ``pipelines`` (it needs the ``train`` extra); the CLI only parses and hands over."""
    try:
        from tsfm.pipelines.train import TRAIN_PRIOR_BLOCK, TrainConfig, TrainingError, is_main_process, train
    except ImportError as err:
        raise CommandError(f"training needs the train extra (pip install 'tsfm[train]'): {err}") from None
    import torch

    from tsfm.checkpoint import CheckpointError
    from tsfm.pipelines.data.corpus import CorpusError, load_corpus
    from tsfm.pipelines.data.upsample import UpsampleError, add_upsampled, check_texture, parse_upsampling
    from tsfm.pipelines.step_profile import StepProfiler, parse_profile_steps

    if args.distill_weight is not None and args.teacher is None:
        raise CommandError("--distill-weight needs --teacher (the model to distil from)")
    if args.upsample_real is not None and args.real_data is None:
        raise CommandError("--upsample-real needs --real-data (the series it interpolates)")
    if args.upsample_texture is not None and args.upsample_real is None:
        raise CommandError("--upsample-texture needs --upsample-real (the copies it shapes)")
    try:
        upsampling = parse_upsampling(args.upsample_real) if args.upsample_real is not None else {}
    except UpsampleError as err:
        raise CommandError(f"--upsample-real: {err}") from None
    callbacks = []
    if args.profile_steps is not None:
        try:
            callbacks.append(StepProfiler(*parse_profile_steps(args.profile_steps), args.out))
        except ValueError as err:
            raise CommandError(f"--profile-steps: {err}") from None
    texture = args.upsample_texture or 0.0
    try:
        check_texture(texture)
    except UpsampleError as err:
        raise CommandError(f"--upsample-texture: {err}") from None
    try:
        model_config = _model_config(args)
        share = args.synthetic_share if args.synthetic_share is not None else (
            1.0 if args.real_data is None else 0.5)
        gpu = args.accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available()
        precision = args.precision if args.precision != "auto" else ("bf16-mixed" if gpu else "32-true")
        train_config = TrainConfig(
            steps=args.steps, batch_size=args.batch_size, learning_rate=args.learning_rate,
            warmup_steps=args.warmup_steps, context_length=args.context_length, mask_ratio=args.mask_ratio,
            synthetic_share=share, mixup_prob=args.mixup_prob, full_context_prob=args.full_context_prob,
            pool_size=args.pool_size, prior_mix=_prior_mix(args.prior_mix),
            prior_block=TRAIN_PRIOR_BLOCK if args.prior_block is None else args.prior_block, seed=args.seed,
            precision=precision, val_every=args.val_every, checkpoint_every=args.checkpoint_every,
            max_minutes=args.max_minutes, compile=gpu if args.compile is None else args.compile, devices=args.devices,
            grown_lr_scale=args.grown_lr_scale, teacher=args.teacher,
            distill_weight=0.5 if args.distill_weight is None else args.distill_weight,
            window_balance=args.window_balance,
        )
        real = validation = None
        mix = "" if train_config.prior_mix is None else f", mix {args.prior_mix}"
        parts = [f"synthetic priors (tsfm.pipelines.data.priors{mix}), {share:.0%} of windows"] if share > 0 else []
        if args.real_data is not None:
            real, validation = load_corpus(args.real_data, max_length=args.max_series_length,
                                           validation_share=args.validation_share,
                                           validation_split=args.validation_split)
            added = add_upsampled(real, upsampling, max_length=args.max_series_length, texture=texture,
                                  seed=args.seed) if upsampling else 0
            if upsampling and not added:
                raise CommandError(f"--upsample-real {args.upsample_real}: no training series under {args.real_data} "
                                   "has one of those frequencies")
            shape = f", texture {texture:g}" if texture else ""
            upsampled = f"{added} of them upsampled copies ({args.upsample_real}{shape}); " if added else ""
            parts.append(f"{len(real)} real series from {args.real_data} ({upsampled}{len(validation)} held out for "
                         f"validation, split by {args.validation_split})")
        description = " + ".join(parts)
        path = train(model_config, train_config, args.out, real=real, validation=validation,
                     data_description=description, command=_command_line(), init_from=args.init_from,
                     accelerator=args.accelerator, callbacks=callbacks)
    except (TrainingError, CorpusError, CheckpointError) as err:
        raise CommandError(str(err)) from None
    except ValueError as err:  # an unknown backbone or preset
        raise CommandError(str(err)) from None
    if is_main_process():  # the other processes of a --devices run wrote nothing
        print(f"wrote {path}")
    return EXIT_OK


def _prior_mix(text: str | None) -> dict[str, float] | None:
    """``--prior-mix "a=0.2,b=0"`` -> the default mix with those shares replaced (None when not given)."""
    if text is None:
        return None
    from tsfm.pipelines.data.priors import DEFAULT_PRIOR_MIX

    mix = dict(DEFAULT_PRIOR_MIX)
    for item in text.split(","):
        name, _, share = (part.strip() for part in item.partition("="))
        try:
            value = float(share)  # an item without "=" has an empty share and fails here too
        except ValueError:
            value = None
        if not name or value is None:
            raise CommandError(f"--prior-mix: expected FAMILY=SHARE items separated by commas, got {item!r}")
        mix[name] = value
    return mix


def _model_config(args: argparse.Namespace) -> ModelConfig:
    """The run's model: from ``--init-from``'s checkpoint (model flags refused), else the backbone and preset."""
    from tsfm.presets import preset_config

    model_flags = {"--backbone": args.backbone, "--preset": args.preset, "--horizon-patches": args.horizon_patches,
                   "--horizon-embedding": args.horizon_embedding or None}  # --seasonal-hint, --naive-gate may grow one
    # fields set alike on a new model and over --init-from (grown, or adapted: tsfm.pipelines.train)
    changes = {name: True for name, flag in (("seasonal_hint", args.seasonal_hint), ("naive_gate", args.naive_gate))
               if flag}
    if args.scale_loc_steps is not None:
        changes["scale_loc_steps"] = args.scale_loc_steps
    if args.init_from is not None:
        from tsfm.checkpoint import read_checkpoint_config, resolve_model_path

        given = [flag for flag, value in model_flags.items() if value is not None]
        if given:
            raise CommandError(f"{', '.join(given)}: the model comes from --init-from {args.init_from}; "
                               "leave the model flags out")
        config, _ = read_checkpoint_config(resolve_model_path(args.init_from))
        if args.grow_layers is not None and args.grow_layers <= config.n_layers:
            raise CommandError(f"--grow-layers {args.grow_layers} must exceed the {config.n_layers} blocks of "
                               f"--init-from {args.init_from}")
        if args.context_length > config.context_length:
            raise CommandError(f"--context-length {args.context_length} exceeds the context of --init-from "
                               f"{args.init_from} ({config.context_length})")
        if args.grow_layers is not None:
            changes["n_layers"] = args.grow_layers
        return config.replace(**changes)  # a bad value is a ValueError: the caller's CommandError
    if args.grow_layers is not None:
        raise CommandError("--grow-layers grows the model of --init-from; give --init-from too")
    changes["context_length"] = max(args.context_length, 2048)
    if args.horizon_patches is not None:
        changes["train_horizon_patches"] = args.horizon_patches
    if args.horizon_embedding:
        changes["horizon_embedding"] = True
    return preset_config(args.backbone or "xlstm[3:1]", args.preset or "1M", **changes)


def _command_line() -> str | None:
    """The command as typed, for results files (None when called in-process, e.g. from tests)."""
    import shlex

    program = Path(sys.argv[0]) if sys.argv else Path()
    if program.name == "tsfm":
        return shlex.join(["tsfm", *sys.argv[1:]])
    if program.name == "__main__.py" and program.parent.name == "tsfm":
        return shlex.join(["python", "-m", "tsfm", *sys.argv[1:]])
    return None


@command(
    "pack-run",
    "Pack a training run's resume state (checkpoints/last.ckpt and its logs) small enough to move: bfloat16 weights "
    "and AdamW step sizes in safetensors shards, the rest as it was (tsfm.pipelines.run_state says what is given up).",
    arg("run_dir", type=Path, metavar="RUN", help="run folder (the --out of tsfm train)"),
    arg("out", type=Path, help="folder to write the pack into"),
    arg("--keep-momentum", action="store_true",
        help="keep AdamW's first moment too (bfloat16; default: dropped, it refills in about ten steps)"),
    arg("--max-shard-mib", type=float, default=15.0, help="largest shard in MiB (default: 15)"),
)
def pack_run_command(args: argparse.Namespace) -> int:
    """Hands over to :func:`tsfm.pipelines.run_state.pack_run` and says what it wrote."""
    from tsfm.pipelines.run_state import RunStateError, pack_run

    if args.max_shard_mib <= 0:
        raise CommandError(f"--max-shard-mib must be positive, got {args.max_shard_mib}")
    try:
        out = pack_run(args.run_dir, args.out, keep_momentum=args.keep_momentum,
                       max_shard_bytes=int(args.max_shard_mib * 2**20))
    except RunStateError as err:
        raise CommandError(str(err)) from None
    files = sorted(out.iterdir())
    print(f"wrote {out}: {len(files)} files, {sum(f.stat().st_size for f in files) / 2**20:.1f} MiB")
    return EXIT_OK


@command(
    "unpack-run",
    "Write a packed run (tsfm pack-run) back into a run folder; tsfm train with the run's settings and this --out "
    "resumes it at its step.",
    arg("pack", type=Path, help="folder written by tsfm pack-run"),
    arg("run_dir", type=Path, metavar="RUN",
        help="run folder to write checkpoints/last.ckpt and logs/ into (must hold no checkpoint)"),
)
def unpack_run_command(args: argparse.Namespace) -> int:
    """Hands over to :func:`tsfm.pipelines.run_state.unpack_run`."""
    from tsfm.pipelines.run_state import RunStateError, unpack_run

    try:
        print(f"wrote {unpack_run(args.pack, args.run_dir)}")
    except RunStateError as err:
        raise CommandError(str(err)) from None
    return EXIT_OK


@command(
    "sweep",
    "The scaling sweep: train every backbone at every preset with one recipe, score each zero-shot, append one row "
    "per configuration to OUT/results.csv; resumable run by run (finished runs are skipped).",
    arg("--backbones", default="xlstm[3:1],mamba2,gdn",
        help="comma-separated backbone specs; commas inside brackets stay in the spec, e.g. xlstm[1:0,conv],gdn"),
    arg("--presets", default="1M,3M,10M,40M,80M", help="comma-separated presets"),
    arg("--seeds", default="0", help="comma-separated seeds (default: 0)"),
    arg("--tokens", default=None,
        help="token budget per preset overriding the recipe, e.g. 1M=12e6,10M=80e6 (default: the recipe table)"),
    arg("--out", type=Path, required=True, help="sweep folder (results.csv, runs/)"),
    arg("--real-data", type=Path, default=None, help="GIFT-Eval-format root of real pretraining series"),
    arg("--benchmark", type=Path, required=True, help="benchmark root to score on (tsfm data build-benchmark)"),
    arg("--normaliser", type=Path, default=Path("reports/results/seasonal_naive/all_results.csv"),
        help="Seasonal-Naive all_results.csv that normalises the scores"),
    arg("--parallel", type=int, default=1, help="runs side by side on one device (default: 1)"),
    arg("--max-minutes", type=float, default=None, help="time budget per run in this call (resumed later)"),
    arg("--context-length", type=int, default=2048, help="training context (default: 2048)"),
    arg("--horizon-patches", type=int, default=24, help="future patches per window (default: 24)"),
    arg("--max-series-length", type=int, default=None, help="keep the last N steps of longer real series"),
    arg("--devices", type=int, default=1,
        help="devices per run, data-parallel (as tsfm train --devices; not with --parallel; default: 1)"),
    arg("--decodings", default="masked,autoregressive",
        help="score every run with each of these decodings, one row each (default: masked,autoregressive)"),
    arg("--no-horizon-embedding", action="store_true",
        help="train without the horizon embedding on the masked future tokens (the default recipe has it)"),
    arg("--read-alone-rows", action="store_true",
        help="also score every run with contexts shorter than the trained window read alone, as rows scored "
             "before the fourteenth session were (short_contexts = alone), so new runs join their tables"),
    arg("--compile", action="store_true",
        help="torch.compile each run's model around its sequence ops (as tsfm train --compile): faster steps, the "
             "same recipe; a run keeps the setting it started with"),
)
def sweep_command(args: argparse.Namespace) -> int:
    """The runner lives in ``tsfm.pipelines.sweep``; the CLI parses, plans and hands over."""
    import dataclasses

    from tsfm.pipelines.sweep import RECIPES, SweepError, SweepSettings, plan_runs, run_sweep
    from tsfm.pipelines.train import is_main_process

    try:
        recipes = dict(RECIPES)
        for item in filter(None, (args.tokens or "").split(",")):
            preset, _, value = item.partition("=")
            if preset not in recipes or not value:
                raise SweepError(f"--tokens: expected PRESET=TOKENS with a known preset, got {item!r}")
            recipes[preset] = dataclasses.replace(recipes[preset], tokens=float(value))
        runs = plan_runs(split_specs(args.backbones),
                         [p.strip() for p in args.presets.split(",") if p.strip()],
                         [int(s) for s in args.seeds.split(",")])
        settings = SweepSettings(out=args.out, real_data=args.real_data, benchmark=args.benchmark,
                                 normaliser=args.normaliser, context_length=args.context_length,
                                 horizon_patches=args.horizon_patches, max_minutes=args.max_minutes,
                                 max_series_length=args.max_series_length, recipes=recipes,
                                 devices=args.devices, horizon_embedding=not args.no_horizon_embedding,
                                 decodings=tuple(d.strip() for d in args.decodings.split(",") if d.strip()),
                                 read_alone_rows=args.read_alone_rows, compile=args.compile)
        finished = run_sweep(runs, settings, parallel=args.parallel)
    except (SweepError, ValueError) as err:
        raise CommandError(str(err)) from None
    if not is_main_process():  # another process of --devices runs: rank 0 scored them and reports
        return EXIT_OK
    print(f"finished {len(finished)} run(s): {', '.join(finished) or '-'}; results in {args.out / 'results.csv'}")
    return EXIT_OK


@command(
    "evaluate",
    "Score models on a benchmark with GIFT-Eval's protocol; writes OUT/<model>/all_results.csv and run.json.",
    arg("--model", nargs="+", default=["default"], metavar="MODEL",
        help="'default', a checkpoint folder, or a baseline: naive, seasonal_naive, auto_ets, auto_arima, auto_theta"),
    arg("--benchmark", type=Path, required=True,
        help="benchmark root: built by `tsfm data build-benchmark`, or a GIFT-Eval download"),
    arg("--configs", nargs="+", default=None, metavar="CONFIG",
        help="result keys (m4_hourly/H/short) or dataset folders (ett1/H); default: all"),
    arg("--out", type=Path, default=None, help="results folder (default: print the summary only)"),
    arg("--batch-size", type=int, default=256, help="series per forward pass of tsfm models (default: 256)"),
    arg("--n-jobs", type=int, default=1, help="processes for the statsforecast baselines (default: 1)"),
    DEVICE_ARG,
    arg("--quiet", action="store_true", help="no progress bars"),
)
def evaluate_command(args: argparse.Namespace) -> int:
    """The protocol lives in ``tsfm.pipelines.evaluate`` (it needs the ``eval`` extra); the CLI parses and prints."""
    try:
        from tsfm.pipelines.evaluate import EvaluationError, evaluate, format_summary
    except ImportError as err:
        raise CommandError(f"evaluation needs the eval extra (pip install 'tsfm[eval]'): {err}") from None
    try:
        report = evaluate(
            args.model, args.benchmark, configs=args.configs, out=args.out, batch_size=args.batch_size,
            n_jobs=args.n_jobs, device=args.device, progress=not args.quiet, command=_command_line(),
        )
    except EvaluationError as err:
        raise CommandError(str(err)) from None
    print(format_summary(report))
    if args.out is not None:
        print(f"wrote {', '.join(str(args.out / name) for name in report)}")
    return EXIT_OK


@command(
    "patterns",
    "Check a model on textbook patterns (sine, sawtooth, square, sine+trend, two seasons) at several periods: nMAE "
    "per horizon block for each decoding beside Seasonal Naive with the true period. Seconds on a CPU; writes "
    "OUT/patterns.csv, .md and .png.",
    arg("--model", default="default", help="built-in model name or checkpoint folder (default: default)"),
    arg("--out", type=Path, required=True, help="folder for patterns.csv, patterns.md and patterns.png"),
    arg("--periods", type=lambda text: [int(p) for p in text.split(",")], default=None,
        help="comma-separated periods in steps (default: 24,96,168,288)"),
    arg("--decodings", default="masked,autoregressive", help="comma-separated decodings (default: both)"),
    arg("--prediction-length", type=int, default=480, help="steps to forecast (default: 480)"),
    DEVICE_ARG,
)
def patterns_command(args: argparse.Namespace) -> int:
    """Loads the model, scores it on the patterns, prints the table."""
    from tsfm.checkpoint import load_model
    from tsfm.config import DECODINGS
    from tsfm.pipelines.patterns import DEFAULT_PERIODS, run_patterns, summary_table

    decodings = [d.strip() for d in args.decodings.split(",") if d.strip()]
    if not decodings or any(d not in DECODINGS for d in decodings):
        raise CommandError(f"--decodings: each must be one of {', '.join(DECODINGS)}, got {args.decodings!r}")
    try:
        model = load_model(args.model, device=args.device or "cpu")
    except (OSError, ValueError) as err:
        raise CommandError(f"--model {args.model}: {err}") from None
    try:
        table, written = run_patterns(model, args.out, name=args.model, command=_command_line(),
                                      periods=args.periods or DEFAULT_PERIODS, decodings=decodings,
                                      prediction_length=args.prediction_length)
    except ValueError as err:
        raise CommandError(str(err)) from None
    print(summary_table(table))
    for path in written:
        print(f"wrote {path}")
    return EXIT_OK


@command(
    "report",
    "Markdown tables, normalised geometric means, win rates and plots from `tsfm evaluate` results, or the "
    "scaling-sweep report from `tsfm sweep`'s results.csv (--sweep).",
    arg("--results", nargs="+", type=Path, default=None, metavar="PATH",
        help="all_results.csv files or folders holding them (one per model)"),
    arg("--sweep", type=Path, default=None, metavar="PATH",
        help="a sweep's results.csv: the scaling report (scores per backbone x preset, losses, the seed study's "
             "claim); instead of --results"),
    arg("--out", type=Path, default=Path("reports"), help="folder for the report and plots (default: reports)"),
    arg("--name", default="report",
        help="file name stem: OUT/NAME.md, OUT/NAME_*.png (default: report; sweep with --sweep)"),
    arg("--benchmark", type=Path, default=None, help="benchmark root, to plot forecast examples"),
    arg("--example-models", nargs="+", default=None, metavar="MODEL",
        help="models drawn in the forecast examples (default: the best baseline and the tsfm models)"),
    arg("--title", default=None, help="report title (default: '<NAME> report')"),
    arg("--note", action="append", default=[], metavar="TEXT", help="a paragraph to add under the title (repeatable)"),
    arg("--reference", default=None, metavar="MODEL",
        help="add every other model's geometric-mean ratio to this model, with 95%% bootstrap intervals over "
             "configurations (is a difference larger than the benchmark can resolve?)"),
    DEVICE_ARG,
)
def report_command(args: argparse.Namespace) -> int:
    """Reports live in ``tsfm.pipelines.report`` (and ``sweep_report`` for ``--sweep``); example plots run models, so
    a bad model name exits 2 too."""
    if (args.results is None) == (args.sweep is None):
        raise CommandError("give exactly one of --results (evaluation results) and --sweep (a sweep's results.csv)")
    if args.sweep is not None:
        return _sweep_report(args)
    try:
        from tsfm.pipelines.evaluate import EvaluationError
        from tsfm.pipelines.report import write_report
    except ImportError as err:
        raise CommandError(f"reports need the eval extra (pip install 'tsfm[eval]'): {err}") from None
    try:
        written = write_report(
            args.results, args.out, name=args.name, benchmark=args.benchmark, example_models=args.example_models,
            device=args.device, title=args.title, command=_command_line(), notes=args.note, reference=args.reference,
        )
    except EvaluationError as err:
        raise CommandError(str(err)) from None
    for path in written:
        print(f"wrote {path}")
    return EXIT_OK


def _sweep_report(args: argparse.Namespace) -> int:
    """``tsfm report --sweep``: the name defaults to ``sweep``, not ``report``, unless one was given."""
    try:
        from tsfm.pipelines.sweep_report import SweepReportError, write_sweep_report
    except ImportError as err:
        raise CommandError(f"reports need the eval extra (pip install 'tsfm[eval]'): {err}") from None
    if args.benchmark is not None or args.example_models is not None or args.reference is not None:
        raise CommandError("--benchmark, --example-models and --reference apply to --results reports, not to --sweep")
    name = "sweep" if args.name == "report" else args.name
    try:
        written = write_sweep_report(args.sweep, args.out, name=name, notes=args.note, command=_command_line(),
                                     title=args.title)
    except SweepReportError as err:
        raise CommandError(str(err)) from None
    for path in written:
        print(f"wrote {path}")
    return EXIT_OK


@command(
    "data",
    "Build GIFT-Eval-format data: the offline zero-shot benchmark, or the real pretraining corpus (disjoint).",
    arg("action", choices=("build-benchmark", "build-pretrain"), help="what to build"),
    arg("--out", type=Path, required=True, help="output folder (created; datasets in it are replaced)"),
    arg("--raw", type=Path, default=None, help="folder holding the raw files (default: <shared>/data/raw)"),
    arg("--shared-dir", default=None,
        help="shared folder holding data/raw (default: $TSFM_SHARED_DIR, else ../shared of the current folder)"),
    arg("--datasets", nargs="+", default=None, metavar="NAME", help="build only these datasets"),
    arg("--quiet", action="store_true", help="no progress bar"),
)
def data_command(args: argparse.Namespace) -> int:
    """The same sub-commands as ``python -m tsfm.pipelines.data``, reached through its own argparse wiring."""
    from tsfm.pipelines.data.__main__ import add_data_commands
    from tsfm.pipelines.data.paths import use_raw_dir

    if args.raw is not None and not args.raw.is_dir():
        raise CommandError(f"--raw {args.raw}: no such folder")
    parser = argparse.ArgumentParser(prog="tsfm data")
    add_data_commands(parser.add_subparsers(dest="action", required=True))
    run = parser.parse_args([args.action, "--out", str(args.out)]).func
    try:
        with use_raw_dir(args.raw):
            return int(run(args))
    except (ValueError, KeyError) as err:  # unknown dataset names, unreadable sources
        raise CommandError(str(err).strip("'\"")) from None

# `tsfm tasks run|report`: the state-tracking suite (issue 13) brings its own argparse actions.
command_group(register_state_tracking_commands)
