"""FP8 accuracy over training (issue 18): a small language model on blockfuse's fused stack trained the same
300 steps in bf16 and with FP8 Linear layers (each recipe), its loss curves side by side.

Run on the GPU (an H100 or H200: about a minute for the four runs, most of it the fp32 run and Triton's
first compilations):
    PYTHONPATH=src python benchmarks/fp8_training.py --out benchmarks/results/fp8_training
Smoke test on CPU (a tiny model, Triton's interpreter):
    TRITON_INTERPRET=1 PYTHONPATH=src python benchmarks/fp8_training.py --device cpu --steps 3 --out /tmp/x

Writes ``fp8_training.json`` (every step's loss of every run, validation losses, step times, card and
versions, the command), ``fp8_training.md`` (the table and the target) and ``fp8_training.png`` (the curves;
with matplotlib).

The model: a token embedding, a ``blockfuse.models.TransformerStack`` run fused (pre-norm, RMSNorm, SwiGLU,
RoPE, causal, no bias; d 512, 4 layers, 8 heads, FFN 1408), a final RMSNorm that adds the last block's
branch, an untied LM head and the loss through ``blockfuse.linear_cross_entropy`` (the logits never whole).

The data: synthetic, seeded, nothing downloaded. A first-order Markov chain over a vocabulary of 4096
(each token has 16 possible successors with random probabilities), in which a sequence now and then
repeats a span of its own past (8 to 64 tokens from a random earlier position): the transitions are
learned by the embedding and the head, the copies only through attention (induction). The JSON gives the
chain's entropy over the targets with copied tokens counted as free, a floor no model reaches (the start
of a copy cannot be foreseen). 300 x 32 training sequences of 512 tokens, each seen once, in one order for
every run; 8 x 32 held-out sequences of the same chain for the validation loss.

The runs, from one initialization and the same batches:

* ``fp32``: parameters and arithmetic in fp32 (the reference);
* ``bf16``: parameters in bf16 for the forward and backward, an fp32 master copy of each that AdamW
  updates and that is copied back after each step (mixed precision with master weights).
  NOTE: not ``torch.autocast``: blockfuse's fused ops take no autocast (a pre-norm stack's residual
  stays fp32 while its branches come back bf16, and the fused norm refuses the mix), so the model holds
  bf16 weights as Megatron-style mixed precision does; the optimizer's numerics are the same;
* ``fp8-tensorwise``, ``fp8-rowwise``, ``fp8-delayed``: the bf16 run with ``blockfuse.fp8.convert(model, recipe)``
  (delayed: tensorwise with x's and the gradients' scales from the layers' amax histories): every
  projection of the blocks (QKV, output, gate|up, down) a ``Float8Linear``; the LM head stays bf16, as
  torchao and torchtitan leave the output layer. The copy back after the optimizer step bumps each
  weight's version counter, which drops its cached FP8 casts (``ops/fp8.py``: no ``clear_weight_cache``
  needed).
  NOTE: the fused block's MLP calls ``gated_mlp`` on its weights rather than its Linear modules, so
  ``convert`` alone would leave the MLP (two thirds of the block's GEMMs) in bf16. For these runs each
  block's MLP is replaced by the same two Linear modules called as modules around ``blockfuse.swiglu``
  (the packed kernel), which ``convert`` then swaps; the JSON lists the FP8 layers and their share of
  the Linear layers' GEMM FLOPs.

AdamW (betas 0.9 / 0.95, weight decay 0.1 on matrices, fp32 state), learning rate 2e-3 after 30 warm-up
steps decaying on a cosine to a tenth, gradients clipped to norm 1. The final train loss is the mean of
the last 20 steps' losses; the target (issue 18) is each FP8 run's within 1% of bf16's. ms/step: wall time
of the training steps after the first 10 (which include Triton's compilations), validation excluded.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import shlex
import sys
import time
from pathlib import Path
from typing import Optional

import torch
from torch import Tensor, nn

import blockfuse
import blockfuse.fp8
from blockfuse.bench.runner import environment
from blockfuse.analyze.png import write_png
from blockfuse.models import BlockConfig, TransformerStack

RUNS = ("fp32", "bf16", "fp8-tensorwise", "fp8-rowwise", "fp8-delayed")
SIZES = {
    "full": dict(vocab=4096, successors=16, d_model=512, layers=4, heads=8, ffn=1408, seq=512, batch=32,
                 validation_batches=8),
    "tiny": dict(vocab=256, successors=8, d_model=64, layers=2, heads=4, ffn=128, seq=32, batch=4,
                 validation_batches=1),
}
TARGET = 0.01  # issue 18: the FP8 runs' final loss within 1% of bf16's
FINAL_WINDOW = 20  # the final train loss: the mean of this many last steps
TIMING_SKIP = 10  # steps left out of ms/step (Triton's first compilations); half the steps of a shorter run


# ----------------------------------------------------------------------------------------
# Data: a Markov chain that now and then copies its own past
# ----------------------------------------------------------------------------------------


def markov_sequences(count: int, length: int, vocab: int, successors: int, seed: int) -> tuple[Tensor, float]:
    """``(tokens, floor)``: ``count`` sequences of ``length`` tokens (int64, CPU; the same whatever the
    device trains) and the chain's mean negative log-likelihood over every token but the first, copied
    tokens counted as free.

    Each token has ``successors`` possible next tokens (drawn at random, probabilities a softmax of normal
    draws). From position 32 on, with probability 1/64 a position starts a copy: the next 8 to 64 tokens
    repeat the sequence from a random earlier position."""
    threads = torch.get_num_threads()
    # NOTE: one thread: 512 steps of ops on a few thousand elements, which thread start-up dominates (3.8 s
    # against 44 s for the full size on a loaded 2-core machine).
    torch.set_num_threads(1)
    try:
        return _markov_sequences(count, length, vocab, successors, seed)
    finally:
        torch.set_num_threads(threads)


def _markov_sequences(count: int, length: int, vocab: int, successors: int, seed: int) -> tuple[Tensor, float]:
    generator = torch.Generator().manual_seed(seed)
    following = torch.randint(vocab, (vocab, successors), generator=generator)  # (vocab, successors)
    probabilities = torch.softmax(torch.randn(vocab, successors, generator=generator, dtype=torch.float64), dim=-1)
    cumulative = probabilities.cumsum(-1).float()  # (vocab, successors): drawn by inverse transform
    log_probabilities = probabilities.log()
    tokens = torch.empty(length, count, dtype=torch.int64)  # time-major while generating
    tokens[0] = torch.randint(vocab, (count,), generator=generator)
    columns = torch.arange(count)
    source = torch.zeros(count, dtype=torch.int64)  # where a running copy reads
    remaining = torch.zeros(count, dtype=torch.int64)  # tokens left to copy
    nll = torch.zeros(count, dtype=torch.float64)
    for t in range(1, length):
        if t >= 32:
            start = (remaining == 0) & (torch.rand(count, generator=generator) < 1 / 64)
            remaining = torch.where(start, torch.randint(8, 65, (count,), generator=generator), remaining)
            source = torch.where(start, (torch.rand(count, generator=generator) * (t - 1)).long(), source)
        previous = tokens[t - 1]
        draw = torch.rand(count, 1, generator=generator)
        choice = torch.searchsorted(cumulative[previous], draw).squeeze(1).clamp_(max=successors - 1)  # (count,)
        copying = remaining > 0
        tokens[t] = torch.where(copying, tokens[source, columns], following[previous, choice])
        nll -= log_probabilities[previous, choice].masked_fill_(copying, 0.0)
        source += copying
        remaining -= copying.long()
    return tokens.t().contiguous(), float(nll.sum() / (count * (length - 1)))


# ----------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------


class LanguageModel(nn.Module):
    """Token embedding, a fused pre-norm TransformerStack, a final RMSNorm fused with the last residual add,
    an untied LM head; ``forward(tokens, targets)`` returns the mean cross-entropy."""

    def __init__(self, config: BlockConfig, layers: int, vocab: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, config.d_model)
        self.stack = TransformerStack(config, layers, "fused")
        self.norm = blockfuse.nn.RMSNorm(config.d_model, eps=config.norm_eps)
        self.head = nn.Linear(config.d_model, vocab, bias=False)

    def forward(self, tokens: Tensor, targets: Tensor) -> Tensor:  # tokens, targets: (batch, seq)
        residual, branch = self.stack.forward_pre_parts(self.embed(tokens))  # (batch, seq, d_model) each
        hidden, _ = blockfuse.rms_norm(branch, self.norm.weight, self.norm.eps, residual=residual,
                                       residual_mode="pre")
        return blockfuse.linear_cross_entropy(hidden, self.head.weight, targets)


class ProjectedFeedForward(nn.Module):
    """A fused block's SwiGLU MLP with its gate|up and down Linear modules called as modules (the same
    modules, so the same parameters), around the packed ``blockfuse.swiglu``: what ``blockfuse.fp8.convert``
    can reach."""

    def __init__(self, feed_forward: nn.Module):
        super().__init__()
        self.gate_up_proj = feed_forward.gate_up_proj  # (2 * ffn, d): gate rows, then up rows
        self.down_proj = feed_forward.down_proj

    def forward(self, x: Tensor) -> Tensor:  # x: (batch, seq, d_model)
        return self.down_proj(blockfuse.swiglu(self.gate_up_proj(x)))


def to_fp8(model: LanguageModel, recipe: str) -> list[str]:
    """Every projection of the blocks as a Float8Linear (the head left in bf16); the FP8 layers' names."""
    for block in model.stack.blocks:
        block.ffn = ProjectedFeedForward(block.ffn)
    blockfuse.fp8.convert(model, recipe=recipe, filter=lambda module, name: not name.startswith("head"))
    return [name for name, module in model.named_modules() if isinstance(module, blockfuse.fp8.Float8Linear)]


def fp8_gemm_share(model: nn.Module) -> float:
    """The FP8 layers' share of the Linear layers' GEMM FLOPs (in x out each; attention's own matmuls,
    bf16 in every run, not counted)."""
    sizes = {name: m.in_features * m.out_features for name, m in model.named_modules() if isinstance(m, nn.Linear)}
    fp8 = sum(size for name, size in sizes.items()
              if isinstance(model.get_submodule(name), blockfuse.fp8.Float8Linear))
    return fp8 / sum(sizes.values())


# ----------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------


def learning_rate(step: int, steps: int, peak: float, warmup: int) -> float:
    """Linear warm-up to ``peak``, then a cosine down to ``peak / 10`` at the last step."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - 1 - warmup)
    return peak * (0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, progress))))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@torch.no_grad()
def evaluate(model: nn.Module, validation: Tensor, batch: int) -> float:
    """The mean loss over the held-out sequences (``validation``: (count, seq + 1))."""
    losses = [model(rows[:, :-1], rows[:, 1:]) for rows in validation.split(batch)]
    return float(torch.stack(losses).mean())


def train(name: str, initial: dict, settings: dict, train_data: Tensor, validation: Tensor, args,
          device: torch.device, on_step) -> dict:
    """One run from the ``initial`` state dict; its record (losses, validation losses, timing, FP8 layers)."""
    config = model_config(settings)
    model = LanguageModel(config, settings["layers"], settings["vocab"])
    model.load_state_dict(initial)
    model.to(device)
    parameters = list(model.parameters())
    masters = parameters if name == "fp32" else [p.detach().clone() for p in parameters]  # fp32
    if name != "fp32":
        model.to(torch.bfloat16)  # the same Parameter objects, now bf16
    fp8_layers = to_fp8(model, name.split("-", 1)[1]) if name.startswith("fp8") else []
    groups = [{"params": [m for m in masters if m.dim() >= 2], "weight_decay": 0.1},
              {"params": [m for m in masters if m.dim() < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), fused=device.type == "cuda")
    if masters is not parameters:
        for master in masters:
            master.grad = torch.zeros_like(master)  # overwritten by each step's bf16 gradients

    steps, batch = args.steps, settings["batch"]
    losses = torch.zeros(steps, device=device)
    validation_losses = [[0, evaluate(model, validation, batch)]]
    eval_every = max(1, args.eval_every)
    skip = min(TIMING_SKIP, steps // 2)  # steps left out of ms/step
    timed = 0.0
    first_step_s = None
    _sync(device)
    began = time.perf_counter()
    for step in range(steps):
        rows = train_data[step * batch:(step + 1) * batch]  # (batch, seq + 1)
        loss = model(rows[:, :-1], rows[:, 1:])
        loss.backward()
        if masters is not parameters:
            torch._foreach_copy_([m.grad for m in masters], [p.grad for p in parameters])
            model.zero_grad(set_to_none=True)
        torch.nn.utils.clip_grad_norm_(masters, 1.0)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, steps, args.lr, args.warmup)
        optimizer.step()
        if masters is parameters:
            optimizer.zero_grad(set_to_none=True)
        else:
            with torch.no_grad():
                torch._foreach_copy_(parameters, masters)  # bumps the versions: stale FP8 weight casts dropped
        losses[step] = loss.detach()
        if step == 0:
            _sync(device)
            first_step_s = time.perf_counter() - began
        if step + 1 == skip or (step + 1) % eval_every == 0 or step + 1 == steps:
            _sync(device)
            now = time.perf_counter()
            if step + 1 > skip:
                timed += now - began
            if (step + 1) % eval_every == 0 or step + 1 == steps:
                validation_losses.append([step + 1, evaluate(model, validation, batch)])
            on_step(step + 1, float(losses[step]))
            _sync(device)
            began = time.perf_counter()
    losses = losses.tolist()
    timed_steps = steps - skip
    final = losses[-min(FINAL_WINDOW, steps):]
    return {
        "dtype": "float32" if name == "fp32" else "bfloat16",
        "recipe": name.split("-", 1)[1] if name.startswith("fp8") else None,
        "fp8_layers": fp8_layers,
        "fp8_gemm_share": round(fp8_gemm_share(model), 4),
        "losses": losses,
        "validation": validation_losses,
        "final_train_loss": sum(final) / len(final),
        "final_validation_loss": validation_losses[-1][1],
        "ms_per_step": round(1e3 * timed / timed_steps, 3),
        "timed_steps": timed_steps,
        "first_step_s": round(first_step_s, 3),
    }


def model_config(settings: dict) -> BlockConfig:
    return BlockConfig(d_model=settings["d_model"], n_heads=settings["heads"], ffn_hidden=settings["ffn"],
                       mlp="swiglu", placement="pre", norm="rms", norm_eps=1e-5, bias=False, rope=True,
                       causal=True, max_seq_len=settings["seq"])


def run(args) -> dict:
    device = torch.device(args.device)
    size = args.size or ("tiny" if device.type == "cpu" else "full")
    settings = dict(SIZES[size])
    for key in ("batch", "seq", "validation_batches"):
        if getattr(args, key) is not None:
            settings[key] = getattr(args, key)
    validation_count = settings["validation_batches"] * settings["batch"]
    tokens, floor = markov_sequences(args.steps * settings["batch"] + validation_count, settings["seq"] + 1,
                                     settings["vocab"], settings["successors"], args.seed)
    tokens = tokens.to(device)
    train_data, validation = tokens[:-validation_count], tokens[-validation_count:]
    torch.manual_seed(args.seed)
    initial = LanguageModel(model_config(settings), settings["layers"], settings["vocab"]).state_dict()
    initial = copy.deepcopy(initial)

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    runs = {}
    began = time.perf_counter()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, disable=args.quiet) as progress:
        for name in args.runs:
            task = progress.add_task(name, total=args.steps)

            def on_step(step, loss, task=task, name=name):
                progress.update(task, completed=step, description=f"{name}: loss {loss:.4f}")

            run_began = time.perf_counter()
            runs[name] = train(name, initial, settings, train_data, validation, args, device, on_step)
            runs[name]["seconds"] = round(time.perf_counter() - run_began, 1)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    command = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])
    return {
        "environment": environment(device), "command": command, "seconds": round(time.perf_counter() - began, 1),
        "model": {**{k: settings[k] for k in ("vocab", "d_model", "layers", "heads", "ffn")},
                  "block": "fused pre-norm, RMSNorm, SwiGLU, RoPE, causal, no bias; untied head",
                  "parameters": sum(t.numel() for t in initial.values())},
        "data": {"seq": settings["seq"], "batch": settings["batch"], "successors": settings["successors"],
                 "train_sequences": len(train_data), "validation_sequences": validation_count, "seed": args.seed,
                 "entropy_floor": round(floor, 4)},
        "optimizer": {"name": "AdamW", "lr": args.lr, "warmup": args.warmup, "schedule": "cosine to lr / 10",
                      "betas": [0.9, 0.95], "weight_decay": 0.1, "clip": 1.0, "steps": args.steps},
        "runs": runs,
        "comparison": compare(runs),
    }


def relative(value: float, baseline: float) -> float:
    return (value - baseline) / baseline


def compare(runs: dict) -> dict:
    """Each run's final train and validation losses relative to bf16's and fp32's (where those ran), and
    whether each FP8 run meets the target."""
    out = {}
    for name, record in runs.items():
        row = {}
        for baseline in ("bf16", "fp32"):
            if baseline in runs and baseline != name:
                row[f"train_vs_{baseline}"] = relative(record["final_train_loss"], runs[baseline]["final_train_loss"])
                row[f"validation_vs_{baseline}"] = relative(record["final_validation_loss"],
                                                            runs[baseline]["final_validation_loss"])
        if record["recipe"] is not None and "train_vs_bf16" in row:
            row["meets_target"] = abs(row["train_vs_bf16"]) <= TARGET
        out[name] = row
    return out


# ----------------------------------------------------------------------------------------
# Reports
# ----------------------------------------------------------------------------------------


def _percent(value: Optional[float]) -> str:
    return "-" if value is None else f"{100 * value:+.2f}%"


def markdown(record: dict) -> str:
    env, model, data = record["environment"], record["model"], record["data"]
    lines = [
        "# FP8 accuracy over training (issue 18)", "",
        f"Card: {env['card']}, torch {env['torch']}, triton {env['triton']}. Model: d {model['d_model']}, "
        f"{model['layers']} layers, {model['heads']} heads, FFN {model['ffn']}, vocabulary {model['vocab']} "
        f"({model['parameters'] / 1e6:.1f} M parameters; {model['block']}). Data: a seeded Markov chain with "
        f"copies, batch {data['batch']} x seq {data['seq']}, {record['optimizer']['steps']} steps; its entropy "
        f"floor {data['entropy_floor']:.3f}. Final train loss: the mean of the last {FINAL_WINDOW} steps; "
        f"validation: {data['validation_sequences']} held-out sequences after the last step. ms/step: after the "
        f"first {TIMING_SKIP} steps, eager, validation excluded.", "",
        "| run | FP8 GEMM share | final train loss | vs bf16 | vs fp32 | validation loss | vs bf16 | ms/step |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, run in record["runs"].items():
        row = record["comparison"][name]
        ms = f"{run['ms_per_step']:.2f}"
        lines.append(f"| {name} | {100 * run['fp8_gemm_share']:.0f}% | {run['final_train_loss']:.4f} | "
                     f"{_percent(row.get('train_vs_bf16'))} | {_percent(row.get('train_vs_fp32'))} | "
                     f"{run['final_validation_loss']:.4f} | {_percent(row.get('validation_vs_bf16'))} | {ms} |")
    lines += ["", f"Target (issue 18): each FP8 run's final train loss within {100 * TARGET:.0f}% of bf16's."]
    for name, row in record["comparison"].items():
        if "meets_target" in row:
            verdict = "met" if row["meets_target"] else "NOT met"
            lines.append(f"- {name}: {_percent(row['train_vs_bf16'])} -> {verdict}")
    lines += ["", f"Command: `{record['command']}`", ""]
    return "\n".join(lines)


def smoothed(values: list[float], weight: float = 0.9) -> list[float]:
    """An exponential moving average, debiased (so the first points are not pulled to zero)."""
    out, average = [], 0.0
    for i, value in enumerate(values):
        average = weight * average + (1 - weight) * value
        out.append(average / (1 - weight ** (i + 1)))
    return out


def plot(record: dict, path: Path) -> bool:
    """The loss curves (raw faint, smoothed, validation as points) and each run's smoothed loss relative
    to bf16's; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    runs = record["runs"]
    figure, (curves, difference) = plt.subplots(1, 2, figsize=(13, 4.8))
    for index, (name, run) in enumerate(runs.items()):
        color = f"C{index}"
        steps = range(1, len(run["losses"]) + 1)
        curves.plot(steps, run["losses"], color=color, alpha=0.2, linewidth=0.8)
        curves.plot(steps, smoothed(run["losses"]), color=color, label=name)
        points = run["validation"]
        curves.plot([p[0] for p in points], [p[1] for p in points], "o", color=color, markersize=3)
        if "bf16" in runs and name != "bf16":
            base = smoothed(runs["bf16"]["losses"])
            ratio = [100 * (a - b) / b for a, b in zip(smoothed(run["losses"]), base)]
            difference.plot(steps, ratio, color=color, label=name)
    curves.axhline(record["data"]["entropy_floor"], color="grey", linestyle=":", label="entropy floor")
    curves.set(xlabel="step", ylabel="loss", title="train loss (smoothed; raw faint; validation: points)")
    curves.set_yscale("log")
    curves.legend()
    for bound in (-100 * TARGET, 100 * TARGET):
        difference.axhline(bound, color="grey", linestyle="--", linewidth=0.8)
    difference.axhline(0, color="black", linewidth=0.6)
    difference.set(xlabel="step", ylabel="% vs bf16", title="smoothed train loss relative to bf16 (target: +-1%)")
    if difference.lines:
        difference.legend()
    env = record["environment"]
    figure.suptitle(f"{env['card']}, torch {env['torch']}, triton {env['triton']}", fontsize=9)
    figure.tight_layout()
    write_png(figure, path, dpi=120)
    plt.close(figure)
    return True


def main(argv: Optional[list[str]] = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (the experiment) or cpu (a smoke test)")
    parser.add_argument("--out", type=Path, required=True, help="folder for fp8_training.{json,md,png}")
    parser.add_argument("--size", choices=sorted(SIZES), help="model and data sizes (default: full on cuda, "
                        "tiny on cpu)")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, help="sequences a step (default: the size's)")
    parser.add_argument("--seq", type=int, help="tokens a sequence (default: the size's)")
    parser.add_argument("--runs", nargs="+", choices=RUNS, default=list(RUNS))
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--eval-every", type=int, default=50, help="validation every this many steps")
    parser.add_argument("--validation-batches", type=int, help="held-out batches (default: the size's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    if args.steps <= 0:
        parser.error("--steps: expected a positive number of steps")
    args.warmup = min(args.warmup, args.steps)
    record = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fp8_training.json").write_text(json.dumps(record, indent=1) + "\n")
    (args.out / "fp8_training.md").write_text(markdown(record))
    plotted = plot(record, args.out / "fp8_training.png")
    print(markdown(record))
    print(f"wrote {args.out}/fp8_training.json, .md" + (", .png" if plotted else " (no matplotlib: no .png)"))
    return record


if __name__ == "__main__":
    main()
