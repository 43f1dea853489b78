"""Static-cache decoding under transformers' compile: HF as built against ``blockfuse.patch`` with and without
the small-input rule of ``runtime.use_triton`` (under torch.compile, a call without autograd on at most
``COMPILED_INFERENCE_MAX_ELEMENTS`` elements runs the reference, which Inductor fuses), in two rounds.

    PYTHONPATH=src python3 benchmarks/static_decode_rule.py [--tokens 33] [--reps 7]

HF Llama of ``bench model hf-llama`` (4 layers, d 2048, batch 1, prompt 512), bf16, on CUDA. Prints ms per new
token ((generate of N - generate of 1) / (N - 1), median of the repetitions, and each repetition).
"""

from __future__ import annotations

import argparse
import time

import torch

from blockfuse import runtime
from blockfuse.bench import hf_generate, hf_llama


def per_token(model, ids, config, tokens: int, reps: int) -> list[float]:
    hf_generate.generate(model, ids, tokens, config)
    hf_generate.generate(model, ids, 1, config)
    samples = []
    for _ in range(reps):
        torch.cuda.synchronize()
        began = time.perf_counter()
        hf_generate.generate(model, ids, 1, config)
        torch.cuda.synchronize()
        first = time.perf_counter() - began
        began = time.perf_counter()
        hf_generate.generate(model, ids, tokens, config)
        torch.cuda.synchronize()
        samples.append(((time.perf_counter() - began) - first) / (tokens - 1) * 1e3)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=33)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    base, ids = hf_llama.build_generator(hf_llama.FULL, torch.bfloat16, torch.device("cuda"))
    config = hf_generate._compile_config(ids.device)
    rule = runtime.COMPILED_INFERENCE_MAX_ELEMENTS
    for name in ("hf", "blockfuse, no rule", "blockfuse, rule") * 2:
        torch._dynamo.reset()
        runtime.COMPILED_INFERENCE_MAX_ELEMENTS = -1 if name.endswith("no rule") else rule
        model, _ = hf_llama.make_provider("hf-eager" if name == "hf" else "blockfuse", base)
        samples = per_token(model, ids, config, args.tokens, args.reps)
        print(f"{name:20s} {sorted(samples)[len(samples) // 2]:.3f} ms per new token  "
              f"{[round(s, 2) for s in samples]}", flush=True)
        del model
        torch.cuda.empty_cache()
    runtime.COMPILED_INFERENCE_MAX_ELEMENTS = rule


if __name__ == "__main__":
    main()
