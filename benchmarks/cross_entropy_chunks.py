"""How the fused LM-head cross-entropy's chunk size trades memory for speed, against the three GEMMs' floor.

    PYTHONPATH=src python3 benchmarks/cross_entropy_chunks.py [--shapes 8192x4096x128256 ...] \
        [--chunks low-memory 256 1024 ...] [--peers]

For each (tokens, d, vocab), bf16, on CUDA: the floor (the three GEMMs of a training step on whole tensors,
``logits = h W^T``, ``dh = dlogits W``, ``dW = dlogits^T h``, timed as cuBLAS runs them) and
``blockfuse.linear_cross_entropy`` forward + backward at each chunk size: ms (median of CUDA events over
repetitions), the fraction of the floor, peak memory above the inputs and their gradients, and the relative
errors of the loss and of the gradients against the reference in fp32, beside those of the reference in
bf16 (logits in bf16, loss in fp32: what Hugging Face computes). A chunk is a number of tokens or
``low-memory`` (``chunk_size="low-memory"``: logits no larger than the hidden states). ``--peers``: also
``torch.compile`` of Hugging Face's loss, Liger-Kernel's and Cut Cross-Entropy's fused losses (those installed),
timed the same way. Prints a table; with ``--json PATH`` writes the records.
"""

from __future__ import annotations

import argparse
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


def chunk_arg(text: str):
    """--chunks' items: a number of tokens, or low-memory."""
    if text == "low-memory":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of tokens or low-memory, got {text!r}") from None


def profile_step(h, w, t, chunk) -> None:
    """Prints the GPU time of each kernel in one forward + backward at ``chunk`` (after a warm step)."""
    from torch.profiler import ProfilerActivity, profile

    hg, wg = h.clone().requires_grad_(), w.clone().requires_grad_()
    blockfuse.linear_cross_entropy(hg, wg, t, chunk_size=chunk).backward()
    torch.cuda.synchronize()
    hg.grad = wg.grad = None
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        blockfuse.linear_cross_entropy(hg, wg, t, chunk_size=chunk).backward()
        torch.cuda.synchronize()
    print(f"  one step at chunk {chunk}, GPU time a kernel:")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=90))


# (BLOCK_V, BLOCK_D, BLOCK_K, warps, stages, the sum so far loaded before the products)
DW_CONFIGS = [(128, 128, 64, 4, 3, False), (128, 128, 64, 4, 1, True), (128, 128, 64, 4, 2, True),
              (64, 128, 64, 4, 1, True), (64, 128, 64, 4, 2, True), (128, 64, 64, 4, 2, True), (64, 256, 64, 4, 2, True),
              (64, 64, 64, 4, 2, True), (128, 256, 64, 8, 2, True), (64, 128, 32, 4, 3, True)]
_DW_NAMES = ("DW_BLOCK_V", "DW_BLOCK_D", "DW_BLOCK_K", "DW_WARPS", "DW_STAGES", "DW_ADD_FIRST")


def dw_sweep(tokens_list, shapes) -> list:
    """A chunk's weight-gradient update alone, ``dW += G^T H`` (bf16, V x d from each shape, K tokens): cuBLAS's
    ``addmm_`` against the Triton kernel at each (BLOCK_V, BLOCK_D, BLOCK_K, warps, stages) of DW_CONFIGS; ms and
    dW's bytes (read and written) a second; the kernel's error against fp64 beside addmm_'s."""
    records = []
    saved = [getattr(cross_entropy, name) for name in _DW_NAMES]
    for text in shapes:
        _, d, vocab = (int(v) for v in text.split("x"))
        dw = (torch.randn(vocab, d, device="cuda") * 0.01).bfloat16()
        gbytes = 4 * vocab * d / 1e9
        print(f"\n{text}: dW += G^T H alone, dW {2 * vocab * d / 2**30:.2f} GiB")
        for k in tokens_list:
            g = cross_entropy.logits_buffer(dw, k, vocab)
            g.copy_(torch.randn(k, vocab, device="cuda") * 1e-4)
            h = torch.randn(k, d, device="cuda").bfloat16()
            ms = cuda_ms(lambda: dw.addmm_(g.t(), h))
            line = f"  K {k:>5}: addmm_ {ms:7.3f} ms ({gbytes / ms:4.2f} TB/s of dW)"
            rec = {"shape": text, "tokens": k, "addmm_ms": ms, "kernel": {}}
            small = (dw[:4096].double(), g[:, :4096], h)
            exp = small[0] + small[1].double().t() @ small[2].double()
            rec["addmm_err"] = rel(small[0].bfloat16().clone().addmm_(small[1].t(), small[2]), exp)
            for config in DW_CONFIGS:
                for name, value in zip(_DW_NAMES, config):
                    setattr(cross_entropy, name, value)
                try:
                    kms = cuda_ms(lambda: cross_entropy.launch_weight_grad(g, h, dw, accumulate=True))
                    part = small[0].bfloat16().contiguous()
                    cross_entropy.launch_weight_grad(small[1], small[2], part, accumulate=True)
                    err = rel(part, exp)
                except Exception as error:  # noqa: BLE001 (a config that does not compile is reported)
                    print(f"    {config}: {type(error).__name__}: {str(error)[:120]}")
                    continue
                rec["kernel"][str(config)] = {"ms": kms, "err": err}
                line += f"\n    {config[:3]}/{config[3]}w/{config[4]}s{'/add-first' if config[5] else ''} {kms:7.3f} ms ({ms / kms:4.2f}x)"
            print(line + f"  err addmm {rec['addmm_err']:.1e}")
            records.append(rec)
            del g, h
        del dw
        torch.cuda.empty_cache()
    for name, value in zip(_DW_NAMES, saved):
        setattr(cross_entropy, name, value)
    return records


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
    parser.add_argument("--profile", type=chunk_arg, metavar="CHUNK",
                        help="also profile one step at this chunk size (at each shape): GPU time a kernel")
    parser.add_argument("--cublas-dw", action="store_true",
                        help="also run each chunk size with the weight gradient's update on cuBLAS (addmm_), not the "
                        "Triton kernel (cross_entropy.DW_KERNEL_MAX_TOKENS = 0)")
    parser.add_argument("--both-low-memory-loops", action="store_true",
                        help="also run each low-memory chunk with the one-pass and with the two-pass loop "
                        "(cross_entropy.LOW_MEMORY_TWO_PASS = False / True)")
    parser.add_argument("--dw-sweep", nargs="*", type=int, metavar="TOKENS",
                        help="first time the weight gradient's update alone at these chunk sizes: addmm_ against the "
                        "kernel's configurations")
    parser.add_argument("--json")
    args = parser.parse_args()
    records = []
    if args.dw_sweep:
        records += dw_sweep(args.dw_sweep, args.shapes)
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
        # (provider, chunk, strict reductions, dW on cuBLAS, low-memory loop: None the rule's, True two passes)
        runs = [("blockfuse", chunk, False, False, None) for chunk in args.chunks]
        if args.both_low_memory_loops:
            runs += [("blockfuse", chunk, False, False, two) for chunk in args.chunks if chunk == "low-memory"
                     for two in (False, True)]
        if args.cublas_dw:
            runs += [("blockfuse", chunk, False, True, None) for chunk in args.chunks]
        if args.strict_reduction:
            runs += [("blockfuse", chunk, True, False, None) for chunk in args.chunks]
        found = peers() if args.peers else {}
        runs += [(name, None, False, False, None) for name in found]
        dw_max = cross_entropy.DW_KERNEL_MAX_TOKENS
        for provider, chunk, strict, cublas_dw, two_pass in runs:
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = not strict
            cross_entropy.DW_KERNEL_MAX_TOKENS = 0 if cublas_dw else dw_max
            cross_entropy.LOW_MEMORY_TWO_PASS = two_pass
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
            record = {"shape": text, "provider": provider, "chunk": chunk, "chunk_tokens": rows,
                      "vocab_block": block, "strict_reduction": strict, "cublas_dw": cublas_dw, "ms": ms, "floor_ms": floor, "of_floor": floor / ms,
                      "peak_mib_above_inputs_and_grads": peak, "loss_err": rel(loss, ref[0]),
                      "dh_err": rel(hg.grad, ref[1]), "dw_err": rel(wg.grad, ref[2])}
            records.append(record)
            if not chunk:
                label = f"{provider:<11}"
            else:
                label = f"chunk {rows:>5}" + (" (low-memory)" if chunk == "low-memory" else "")
                label += f" x {block} classes, two passes" if block else ""
            label += " cuBLAS dW" if cublas_dw else ""
            print(f"  {label}{' strict' if strict else '       '}: {ms:8.2f} ms  {floor / ms:5.2f} of the floor  peak +{peak:7.1f} MiB  "
                  f"err loss {record['loss_err']:.1e} dh {record['dh_err']:.1e} dW {record['dw_err']:.1e}")
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
        cross_entropy.DW_KERNEL_MAX_TOKENS = dw_max
        cross_entropy.LOW_MEMORY_TWO_PASS = None
        if args.profile:
            profile_step(h, w, t, args.profile)
        del h, w, t, ref
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"card": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "records": records}, f, indent=1)


if __name__ == "__main__":
    main()
