"""Train one token classifier on one task and score it at several lengths: one cell of the grid, one result row
per evaluation length.

Training draws fresh sequences every step (no fixed training set, so nothing to overfit) with lengths uniform in
``[task.min_length, train_length]``, padded to ``train_length`` (one shape for every step, so the GPU kernels
compile once). Evaluation draws a fixed set per (task, length) from :data:`EVAL_SEED` (the same sequences for every
backbone and seed) in which every sequence has exactly the evaluation length, and scores every position: raw
accuracy, chance-normalised accuracy ``(acc - chance) / (1 - chance)`` (DESIGN §6's measure) and the accuracy of the
last position alone (for a^n b^n that is the membership question). On CUDA the forward runs under bf16 autocast;
the recurrent states stay float32 inside the kernels.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from tsfm.pipelines.state_tracking.model import ModelSize, TokenClassifier
from tsfm.pipelines.state_tracking.tasks import IGNORE_INDEX, Task, chance_level, get_task

EVAL_SEED = 1_000_003
"""Seed of the evaluation sets (offset by the length); far from the training seeds, which are the cell seeds."""


@dataclass(frozen=True)
class TrainSettings:
    """The recipe every cell of a grid shares (the same budget for every backbone)."""

    steps: int = 1000
    batch_size: int = 64
    train_length: int = 128
    eval_lengths: tuple[int, ...] = (128, 512, 2048)
    eval_sequences: int = 256
    eval_tokens_per_batch: int = 131_072
    """Sequences per evaluation forward = ``max(1, eval_tokens_per_batch // length)`` (bounds the memory)."""
    learning_rate: float = 3e-3
    """High for AdamW because the models are small and the budget short: on the CPU, ``xlstm[1:1]`` at the default
    size learns parity in 800 steps at 3e-3 (1.000 at lengths 128 and 512) and not at 1e-3 (0.540 and 0.508)."""
    min_learning_rate: float = 3e-4
    warmup_steps: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    size: ModelSize = field(default_factory=ModelSize)

    def __post_init__(self) -> None:
        problems = [f"{name} must be positive, got {getattr(self, name)}" for name in
                    ("steps", "batch_size", "train_length", "eval_sequences", "eval_tokens_per_batch")
                    if getattr(self, name) < 1]
        if not self.eval_lengths or min(self.eval_lengths) < 1:
            problems.append(f"eval_lengths must be positive lengths, got {self.eval_lengths}")
        if problems:
            raise ValueError("invalid TrainSettings: " + "; ".join(problems))


@dataclass(frozen=True)
class Cell:
    """One model of the grid: a task, a backbone spec and a seed (model init and training data)."""

    task: str
    backbone: str
    seed: int


RESULT_COLUMNS = ("task", "backbone", "seed", "train_length", "eval_length", "accuracy", "normalised_accuracy",
                  "final_accuracy", "chance", "steps", "seconds", "train_loss", "parameters", "device")
"""Columns of a result row (and of the results CSV), in order."""


def learning_rate(step: int, settings: TrainSettings) -> float:
    """Linear warm-up to the peak, then cosine decay to ``min_learning_rate`` at the last step."""
    if step < settings.warmup_steps:
        return settings.learning_rate * (step + 1) / settings.warmup_steps
    progress = (step - settings.warmup_steps) / max(1, settings.steps - settings.warmup_steps)
    cosine = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return settings.min_learning_rate + (settings.learning_rate - settings.min_learning_rate) * cosine


def _autocast(device: torch.device) -> Any:
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else torch.autocast("cpu",
                                                                                                       enabled=False)


def train_model(model: TokenClassifier, task: Task, settings: TrainSettings, *, seed: int,
                device: torch.device, progress: Any = None) -> float:
    """Train ``model`` in place; returns the mean loss over the last tenth of the steps.

    ``progress`` is an optional tqdm bar advanced once per step.
    """
    generator = torch.Generator().manual_seed(seed)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": settings.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=settings.learning_rate,
                                  betas=(0.9, 0.95), fused=device.type == "cuda")
    tail = max(1, settings.steps // 10)
    tail_loss = torch.zeros((), device=device)
    model.train()
    for step in range(settings.steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, settings)
        batch = task.sample(settings.batch_size, settings.train_length, min_length=task.min_length,
                            generator=generator).to(device)
        with _autocast(device):
            logits = model(batch.tokens)
        loss = F.cross_entropy(logits.float().flatten(0, 1), batch.labels.flatten(), ignore_index=IGNORE_INDEX)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings.grad_clip)
        optimizer.step()
        if step >= settings.steps - tail:
            tail_loss += loss.detach()
        if progress is not None:
            progress.update(1)
    return float(tail_loss) / tail


@torch.no_grad()
def evaluate(model: TokenClassifier, task: Task, length: int, settings: TrainSettings,
             device: torch.device) -> dict[str, float]:
    """Accuracy over every position of ``settings.eval_sequences`` sequences of exactly ``length`` tokens (rounded
    down to a length the task can form), its chance-normalised form and the accuracy of the last position."""
    data = task.sample(settings.eval_sequences, length, generator=torch.Generator().manual_seed(EVAL_SEED + length))
    per_batch = max(1, settings.eval_tokens_per_batch // length)
    correct = total = final_correct = 0
    model.eval()
    for start in range(0, settings.eval_sequences, per_batch):
        tokens = data.tokens[start:start + per_batch].to(device)
        labels = data.labels[start:start + per_batch].to(device)
        lengths = data.lengths[start:start + per_batch].to(device)
        with _autocast(device):
            predicted = model(tokens).argmax(dim=-1)
        scored = labels != IGNORE_INDEX
        correct += int(((predicted == labels) & scored).sum())
        total += int(scored.sum())
        rows = torch.arange(len(tokens), device=device)
        final_correct += int((predicted[rows, lengths - 1] == labels[rows, lengths - 1]).sum())
    model.train()
    accuracy = correct / total
    chance = chance_level(task, data.labels)
    return {"accuracy": accuracy, "normalised_accuracy": (accuracy - chance) / (1 - chance),
            "final_accuracy": final_correct / settings.eval_sequences, "chance": chance}


def run_cell(cell: Cell, settings: TrainSettings, device: torch.device | str | None = None, *,
             progress: Any = None) -> list[dict[str, Any]]:
    """Train the cell's model and score it at every evaluation length: one row per length (:data:`RESULT_COLUMNS`).

    The seed fixes the model's initialisation and the training data; the evaluation sets do not depend on it.
    """
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    task = get_task(cell.task)
    started = time.perf_counter()
    torch.manual_seed(cell.seed)
    model = TokenClassifier(cell.backbone, task.vocab_size, task.num_classes, settings.size).to(device)
    train_loss = train_model(model, task, settings, seed=cell.seed, device=device, progress=progress)
    scores = {length: evaluate(model, task, length, settings, device) for length in settings.eval_lengths}
    seconds = time.perf_counter() - started
    common = {**asdict(cell), "train_length": settings.train_length, "steps": settings.steps,
              "seconds": round(seconds, 2), "train_loss": round(train_loss, 6), "parameters": model.num_parameters(),
              "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"}
    rows = [{**common, "eval_length": length, **{k: round(v, 6) for k, v in score.items()}}
            for length, score in scores.items()]
    return [{column: row[column] for column in RESULT_COLUMNS} for row in rows]
