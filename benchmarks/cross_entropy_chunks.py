"""How the fused LM-head cross-entropy's chunk size trades memory for speed, against the three GEMMs' floor.

    PYTHONPATH=src python3 benchmarks/cross_entropy_chunks.py [--shapes 8192x4096x128256 ...] \
        [--chunks low-memory 256 1024 ...] [--peers]

For each (tokens, d, vocab), bf16, on CUDA: the floor (the three GEMMs of a training step on whole tensors,
``logits = h W^T``, ``dh = dlogits W``, ``dW = dlogits^T h``, timed as cuBLAS runs them) and
``blockfuse.linear_cross_entropy`` forward + backward at each chunk size: ms (median of CUDA events over
repetitions), the fraction of the floor, peak memory above the inputs and their gradients, and the relative
errors of the loss and of the gradients against the reference in fp32, beside those of the reference in
bf16 (logits in bf16, loss in fp32: what Hugging Face computes). A chunk is a number of tokens or
``low-memory`` (``chunk_size="low-memory"``: logits no larger than the hidden states). ``--dtype-reductions``: also
each chunk with the op's fp32 split-K reductions off (``cross_entropy.full_precision_reductions`` a no-op: cuBLAS
then reduces in bf16 where it splits K, as PyTorch's default lets it; an A/B of what the fp32 reductions cost).
``--peers``: also
``torch.compile`` of Hugging Face's loss, Liger-Kernel's and Cut Cross-Entropy's fused losses (those installed),
timed the same way. Prints a table; with ``--json PATH`` writes the records.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import statistics

import torch

import blockfuse
from blockfuse.ops import cross_entropy


def cuda_ms(fn, reps: int = 10) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def inputs(tokens: int, d: int, vocab: int, seed: int = 0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    h = torch.randn(tokens, d, device="cuda", generator=g).bfloat16()
    w = (torch.randn(vocab, d, device="cuda", generator=g) * (2.0 / d**0.5)).bfloat16()
    t = torch.randint(0, vocab, (tokens,), device="cuda", generator=g)
    t[torch.rand(tokens, device="cuda", generator=g) < 0.05] = -100
    return h, w, t


def floor_ms(h, w) -> float:
    """The three GEMMs of the step on whole tensors (logits materialized; their softmax not counted)."""
    z = h @ w.t()

    def gemms():
        torch.mm(h, w.t(), out=z)
        torch.mm(z, w)
        torch.mm(z.t(), h)

    ms = cuda_ms(gemms)
    del z
    return ms


def reference(h, w, t, dtype=torch.float32):
    """Loss and gradients of the reference with its inputs in ``dtype`` (whole logits)."""
    hf, wf = h.to(dtype, copy=True).requires_grad_(), w.to(dtype, copy=True).requires_grad_()
    loss = blockfuse.linear_cross_entropy_ref(hf, wf, t, reduction="sum") / (t != -100).sum()
    loss.backward()
    return loss.detach(), hf.grad, wf.grad


def peers() -> dict:
    """name -> loss function of (hidden, weight, target): `blockfuse bench ops`' own `compile` (torch.compile of
    Hugging Face's loss, the logits made whole), `liger` and `cce` providers, the last two where installed."""
    from blockfuse.bench.cross_entropy import BENCHMARKS

    makers = BENCHMARKS[0].providers
    found = {"compile": makers["compile"]()}
    for name in ("liger", "cce"):
        try:
            found[name] = makers[name]()
        except ImportError:
            print(f"  ({name} is not installed: not timed)")
    return found


_fp32_reductions = cross_entropy.full_precision_reductions
_tuning = cross_entropy.TUNING  # (as shipped: each run sets its low-memory loop on it)


def _set_two_pass(two_pass) -> None:
    """The low-memory loop of the runs after: None the rule's, False one pass, True two."""
    cross_entropy.TUNING = dataclasses.replace(_tuning, low_memory_two_pass=two_pass)


def _no_reductions_change():
    """``--dtype-reductions``: the op's GEMMs with PyTorch's reduction flags as they are."""
    return contextlib.nullcontext()


def chunk_arg(text: str):
    """--chunks' items: a number of tokens, or low-memory."""
    if text == "low-memory":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of tokens or low-memory, got {text!r}") from None


def profile_step(h, w, t, chunk, trace=None, loss_fn=None, label=None) -> None:
    """Prints the GPU time of each kernel in one forward + backward at ``chunk`` (after a warm step); with ``trace``
    (a path) the host's ops are recorded too and the Chrome trace written there (for benchmarks/trace_gaps.py).
    ``loss_fn`` (hidden, weight, target) -> loss: profile that instead (a peer, named ``label``)."""
    from torch.profiler import ProfilerActivity, profile

    if loss_fn is None:
        loss_fn = lambda a, b, c: blockfuse.linear_cross_entropy(a, b, c, chunk_size=chunk)  # noqa: E731
        label = f"chunk {chunk}"
    hg, wg = h.clone().requires_grad_(), w.clone().requires_grad_()
    loss_fn(hg, wg, t).backward()
    torch.cuda.synchronize()
    hg.grad = wg.grad = None
    activities = [ProfilerActivity.CUDA] + ([ProfilerActivity.CPU] if trace else [])
    with profile(activities=activities) as prof:
        loss_fn(hg, wg, t).backward()
        torch.cuda.synchronize()
    print(f"  one step at {label}, GPU time a kernel:")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=90))
    if trace:
        prof.export_chrome_trace(trace)


def rel(a, b) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=["8192x4096x128256", "16384x2048x32000", "4096x4096x262144"])
    parser.add_argument("--chunks", nargs="+", type=chunk_arg, default=[128, 256, 512, 1024, 2048])
    parser.add_argument("--strict-reduction", action="store_true",
                        help="also run each chunk size with torch.backends.cuda.matmul."
                        "allow_bf16_reduced_precision_reduction off (cuBLAS split-K partials summed in fp32)")
    parser.add_argument("--peers", action="store_true",
                        help="also time torch.compile of HF's loss and Liger-Kernel's (if installed) the same way")
    parser.add_argument("--profile", type=chunk_arg, metavar="CHUNK", nargs="+",
                        help="also profile one step at these chunk sizes (at each shape): GPU time a kernel")
    parser.add_argument("--profile-peers", action="store_true",
                        help="with --peers: also profile one step of each peer")
    parser.add_argument("--dtype-reductions", action="store_true",
                        help="also run each chunk with the op's fp32 split-K reductions off (see the docstring)")
    parser.add_argument("--both-low-memory-loops", action="store_true",
                        help="also run each low-memory chunk with the one-pass and with the two-pass loop "
                        "(cross_entropy.TUNING.low_memory_two_pass = False / True)")
    parser.add_argument("--profile-loop", choices=("rule", "one", "two"), default="rule",
                        help="the low-memory loop that --profile runs: the rule's, one pass or two")
    parser.add_argument("--trace", metavar="PREFIX",
                        help="with --profile: also record the host's ops and write PREFIX-SHAPE.json (Chrome trace)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="time every run this many times, round after round (interleaved: compare medians)")
    parser.add_argument("--json")
    args = parser.parse_args()
    records = []
    for text in args.shapes:
        tokens, d, vocab = (int(v) for v in text.split("x"))
        h, w, t = inputs(tokens, d, vocab)
        floor = floor_ms(h, w)
        flops = 3 * 2 * tokens * d * vocab
        print(f"\n{text}: three GEMMs {floor:.2f} ms ({flops / floor / 1e9:.0f} TFLOP/s)")
        ref = reference(h, w, t)
        eager = reference(h, w, t, torch.bfloat16)
        print("  reference in bf16: err loss %.1e dh %.1e dW %.1e" % tuple(rel(a, b) for a, b in zip(eager, ref)))
        records.append({"shape": text, "provider": "reference-bf16", "loss_err": rel(eager[0], ref[0]),
                        "dh_err": rel(eager[1], ref[1]), "dw_err": rel(eager[2], ref[2])})
        del eager
        # (provider, chunk, strict reductions, the low-memory loop: None the rule's, False one pass, True two)
        runs = [(provider, chunk, False, None) for chunk in args.chunks
                for provider in ("blockfuse",) + (("blockfuse-dtype-reductions",) if args.dtype_reductions else ())]
        if args.both_low_memory_loops:
            runs += [("blockfuse", chunk, False, two) for chunk in args.chunks if chunk == "low-memory"
                     for two in (False, True)]
        if args.strict_reduction:
            runs += [("blockfuse", chunk, True, None) for chunk in args.chunks]
        found = peers() if args.peers else {}
        runs += [(name, None, False, None) for name in found]
        # --rounds: the whole list again, in the same order, so a drift of the card's clocks falls on every run alike
        for (provider, chunk, strict, two_pass), round_ in ((run, k) for k in range(args.rounds) for run in runs):
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = not strict
            _set_two_pass(two_pass)
            cross_entropy.full_precision_reductions = (_no_reductions_change if provider == "blockfuse-dtype-reductions"
                                                       else _fp32_reductions)
            hg, wg = h.clone().requires_grad_(), w.clone().requires_grad_()
            loss_fn = found.get(provider) or (lambda a, b, c: blockfuse.linear_cross_entropy(a, b, c, chunk_size=chunk))

            def step():
                hg.grad = wg.grad = None
                loss_fn(hg, wg, t).backward()

            step()
            grads = hg.grad.nbytes + wg.grad.nbytes
            hg.grad = wg.grad = None
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated() + grads
            step()
            torch.cuda.synchronize()
            peak = (torch.cuda.max_memory_allocated() - base) / 2**20
            ms = cuda_ms(step)
            with torch.no_grad():
                loss = loss_fn(h, w, t)
            rows, block = cross_entropy.chunk_plan(chunk, tokens, d, vocab, h.element_size()) if chunk else (None, 0)
            record = {"shape": text, "provider": provider, "round": round_, "chunk": chunk, "chunk_tokens": rows,
                      "vocab_block": block, "two_pass_forced": two_pass, "strict_reduction": strict, "ms": ms,
                      "floor_ms": floor, "of_floor": floor / ms,
                      "peak_mib_above_inputs_and_grads": peak, "loss_err": rel(loss, ref[0]),
                      "dh_err": rel(hg.grad, ref[1]), "dw_err": rel(wg.grad, ref[2])}
            records.append(record)
            if not chunk:
                label = f"{provider:<11}"
            else:
                label = f"chunk {rows:>5}" + (" (low-memory)" if chunk == "low-memory" else "")
                label += f" x {block} classes, two passes" if block else ""
            label += " bf16-red" if provider == "blockfuse-dtype-reductions" else ""
            print(f"  {label}{' strict' if strict else '       '}: {ms:8.2f} ms  {floor / ms:5.2f} of the floor  peak +{peak:7.1f} MiB  "
                  f"err loss {record['loss_err']:.1e} dh {record['dh_err']:.1e} dW {record['dw_err']:.1e}")
        if args.rounds > 1:
            print(f"  medians over {args.rounds} rounds:")
            by_run = {}
            for r in records:
                if r.get("shape") == text and "ms" in r:
                    key = (r["provider"], r["chunk"], r["strict_reduction"], r["two_pass_forced"])
                    by_run.setdefault(key, []).append(r["ms"])
            for key, times in by_run.items():
                print(f"    {key[0]:<27} chunk {str(key[1]):>10}: {statistics.median(times):8.2f} ms "
                      f"({min(times):.2f}-{max(times):.2f})")
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
        _set_two_pass(None)
        cross_entropy.full_precision_reductions = _fp32_reductions
        for chunk in args.profile or ():
            name = text if len(args.profile) == 1 else f"{text}-{chunk}"
            trace = f"{args.trace}-{name}.json" if args.trace else None
            _set_two_pass({"rule": None, "one": False, "two": True}[args.profile_loop])
            profile_step(h, w, t, chunk, trace)
            _set_two_pass(None)
        if args.profile_peers:
            for name, fn in found.items():
                trace = f"{args.trace}-{text}-{name}.json" if args.trace else None
                profile_step(h, w, t, None, trace, loss_fn=fn, label=name)
        del h, w, t, ref
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"card": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "records": records}, f, indent=1)


if __name__ == "__main__":
    main()
