"""Greedy generation with a Hugging Face causal LM, the way people run it: the modes ``prefill`` and
``decode`` of ``blockfuse bench model hf-llama`` (``bench.hf_llama`` builds the models and providers).

Each provider's model generates ``new_tokens`` tokens after a prompt of batch 1, greedily
(``do_sample=False``), and always exactly ``new_tokens`` of them (``min_new_tokens = max_new_tokens``,
so no EOS stops it early):

* as built, with transformers' default dynamic KV cache, eagerly;
* ``*-static-compile``: ``cache_implementation="static"`` and transformers' own automatic compile of
  generate (``compile_config=CompileConfig(mode="default")``: the way transformers 5 documents it,
  in ``torch.compile``'s default mode, so no CUDA graphs). NOTE: transformers then compiles only the
  decode steps (``model.__call__``); the prefill runs eagerly into the static cache, so a static
  provider's prefill is its eager model's, over a cache of the full length.

Timing (wall clock, synchronized on CUDA): after a first generate of ``new_tokens`` tokens (its
seconds, compile included, are ``first_call_s``) and one warm-up of each length, each repetition
runs ``generate`` of 1 new token (the prefill: one forward over the prompt into the cache, plus
generate's set-up) and then of ``new_tokens`` tokens. ``prefill`` is the first; ``decode`` is ms per
new token within the second: a logits processor stamps the clock (synchronized on CUDA) each time a new
token's logits are ready, and the N - 1 decode steps are the time from the first stamp (the prefill's
token) to the last, over N - 1. Median, p20 and p80 over the repetitions.

NOTE: decode was ``(generate of N - generate of 1) / (N - 1)`` until 2026-11-28 (the results before then
say so). On a CPU, where the interpreter's eager prefill takes ~300 ms and a compiled decode step ~1 ms,
that difference of two noisy totals came out negative (-0.3 to -8 ms a token in this repository's test);
the stamps time the decode steps alone. Providers measured together (``measure_together``: HF as built and
``blockfuse.patch`` in ``bench model hf-llama``) take their repetitions in turns. ``tokens_match_hf``:
the new tokens equal those of the model as built (dynamic cache, eager, unpatched), and
``first_mismatch_at`` the index of the first new token that differs where not.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import torch

from blockfuse.bench import hf_harness, timing, writer

MODES = ("prefill", "decode")
MODE_TITLES = {"prefill": "prefill", "decode": "decode, per new token"}
STATIC_COMPILE = "-static-compile"  # a provider that generates with a static cache under transformers' compile
BATCH = 1

# The targets: blockfuse.patch at most DECODE_TARGET x HF's ms per new token and PREFILL_TARGET
# x its prefill (both eager, as built); with a static cache under compile, at most STATIC_DECODE_TARGET
# x compiled HF's ms per new token.
DECODE_TARGET = 0.9
PREFILL_TARGET = 0.9
STATIC_DECODE_TARGET = 1.0
PAIRS = (("blockfuse", "hf-eager"), ("blockfuse" + STATIC_COMPILE, "hf" + STATIC_COMPILE))
TARGETS = (  # (mode, ours, baseline, most ours / baseline, what)
    ("decode", *PAIRS[0], DECODE_TARGET, "ms per new token"),
    ("prefill", *PAIRS[0], PREFILL_TARGET, "prefill ms"),
    ("decode", *PAIRS[1], STATIC_DECODE_TARGET, "ms per new token, static cache + compile"),
)

HOW = {
    "decoding": "greedy (do_sample=False), min_new_tokens = max_new_tokens",
    "prefill": "generate of 1 new token",
    "decode": "(generate of N new tokens - generate of 1) / (N - 1)",
    "static_compile": 'generate(cache_implementation="static", compile_config=CompileConfig(mode="default")): '
                      "transformers compiles the decode steps, the prefill runs eagerly",
}


def prompt_ids(vocab: int, length: int, device: torch.device) -> torch.Tensor:
    """A seeded random prompt, (BATCH, length)."""
    generator = torch.Generator().manual_seed(2)
    return torch.randint(0, vocab, (BATCH, length), generator=generator).to(device)


def _compile_config(device: torch.device):
    from transformers import CompileConfig

    # NOTE: mode "default": transformers' own default, "reduce-overhead", replays CUDA graphs.
    config = CompileConfig(mode="default")
    # transformers compiles on CUDA (and a few other accelerators) only unless asked (a test switch).
    config._compile_all_devices = device.type not in ("cuda", "xpu")
    return config


class _StepClock:
    """A logits processor that records the wall clock (synchronized on CUDA) each time generate has the logits of
    a new token: after the prefill's forward, then after each decode step's. Returns the scores as they are."""

    def __init__(self, device: torch.device):
        self.device = device
        self.stamps: list[float] = []

    def __call__(self, input_ids, scores):
        hf_harness.synchronize(self.device)
        self.stamps.append(time.perf_counter())
        return scores


def generate(model, ids: torch.Tensor, new_tokens: int, compile_config=None, clock: "_StepClock | None" = None
             ) -> torch.Tensor:
    """The ``new_tokens`` greedy tokens after ``ids`` (batch, new_tokens); a static cache under
    transformers' compile when ``compile_config`` is given; ``clock`` records each new token's time."""
    from transformers import LogitsProcessorList

    static = {} if compile_config is None else {"cache_implementation": "static", "compile_config": compile_config}
    if clock is not None:
        static["logits_processor"] = LogitsProcessorList([clock])
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                         max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                         pad_token_id=model.config.eos_token_id, **static)
    return out[:, ids.shape[1]:]


def _decode_ms(fn: Callable[["_StepClock"], object], device: torch.device, new_tokens: int) -> tuple[float, float]:
    """(ms per decode step, ms of the whole generate) of ``fn(clock)``, a generate of ``new_tokens`` tokens: the
    time from the first new token's logits to the last's over the ``new_tokens - 1`` decode steps between them."""
    clock = _StepClock(device)
    whole = _wall_ms(lambda: fn(clock), device)
    if len(clock.stamps) != new_tokens:
        raise RuntimeError(f"generate called the step clock {len(clock.stamps)} times for {new_tokens} new tokens")
    return (clock.stamps[-1] - clock.stamps[0]) * 1e3 / (new_tokens - 1), whole


def compare(tokens: torch.Tensor, reference: torch.Tensor) -> dict:
    """``tokens_match_hf`` and, where not, ``first_mismatch_at``: the index of the first differing new token."""
    differ = (tokens != reference).flatten().nonzero()
    return {"tokens_match_hf": not len(differ), "first_mismatch_at": int(differ[0]) if len(differ) else None}


def _wall_ms(fn: Callable, device: torch.device) -> float:
    hf_harness.synchronize(device)
    began = time.perf_counter()
    fn()
    hf_harness.synchronize(device)
    return (time.perf_counter() - began) * 1e3


def _summary(samples: list[float]) -> dict:
    result = timing.summarize(samples)
    return {"ms": result.median, "p20": result.p20, "p80": result.p80}


def measure(name: str, model, ids: torch.Tensor, new_tokens: int, reference: torch.Tensor, modes: Sequence[str],
            device: torch.device, quick: bool) -> list[dict]:
    """One record per mode of ``modes`` (in MODES' order) for the provider ``name`` running ``model``."""
    return measure_together({name: model}, ids, new_tokens, reference, modes, device, quick)


def measure_together(models: dict, ids: torch.Tensor, new_tokens: int, reference: torch.Tensor,
                     modes: Sequence[str], device: torch.device, quick: bool) -> list[dict]:
    """:func:`measure` of several providers (name -> model) whose models live side by side: first calls
    and warm-ups one after the other, then the repetitions in turns (A, B, A, B, ...).

    NOTE: a decode step of this model is host-bound (0.4-0.6 ms of GPU kernels in 4-7 ms of wall
    clock on the lent H200s), and those hosts drift: the same HF model measured 5.1 and then 6.8 ms
    per new token minutes apart in one process (benchmarks/profile_decode.py). Taken in turns, a drift
    falls on every provider alike, and their ratio is that of the same minutes."""
    prepared = {}
    decode = "decode" in modes
    for name, model in models.items():
        config = _compile_config(device) if name.endswith(STATIC_COMPILE) else None
        torch._dynamo.utils.counters.clear()  # this provider's graph breaks only
        tokens, first_call_s = hf_harness.seconds_of_first_call(lambda: generate(model, ids, new_tokens, config),
                                                                device)
        if config is not None and getattr(model, "_compiled_call", None) is None:
            raise RuntimeError("transformers did not compile the decode steps (generate's automatic compile)")
        common = {"first_call_s": first_call_s, **compare(tokens, reference)}
        if config is not None:
            common.update(hf_harness.graph_breaks())
        for length in (new_tokens,) * decode + (1,):  # warm-up (the long one first: the cache keeps its size)
            generate(model, ids, length, config)
        prepared[name] = (model, config, common, [], [], [])
    repetitions = (3 if quick else 5) if device.type == "cpu" else (5 if quick else 10)
    for _ in range(repetitions):
        for model, config, _, prefill, steps, total in prepared.values():
            prefill.append(_wall_ms(lambda: generate(model, ids, 1, config), device))
            if decode:
                step, whole = _decode_ms(lambda clock: generate(model, ids, new_tokens, config, clock), device,
                                         new_tokens)
                steps.append(step)
                total.append(whole)
    records = []
    for name, (_, _, common, prefill, steps, total) in prepared.items():
        if "prefill" in modes:
            records.append({"provider": name, "mode": "prefill", **_summary(prefill), **common})
        if decode:
            records.append({"provider": name, "mode": "decode", **_summary(steps),
                            "generate_ms": timing.summarize(total).median, "new_tokens": new_tokens, **common})
    return records


def targets(records: list[dict]) -> list[dict]:
    """The issue's generation targets (each blockfuse provider against HF run the same way: the eager
    pair always, the static-compile pair when either ran), status met / missed / n/a."""
    pairs = hf_harness.pairs_to_check(records, PAIRS)
    return [hf_harness.pair_check(records, mode, ours, theirs, "ms", f"{text}: {ours} / {theirs}", bound, False,
                                  f"{mode} not in --modes")
            for mode, ours, theirs, bound, text in TARGETS if (ours, theirs) in pairs]


def _tokens(record: dict) -> str:
    return "yes" if record["tokens_match_hf"] else f"no (from new token {record['first_mismatch_at']})"


COLUMNS = (
    ("provider", lambda r: r["provider"]),
    ("mode", lambda r: r["mode"]),
    ("ms (p20-p80)", lambda r: hf_harness.timed(r, ".3f")),
    ("x hf-eager", lambda r: hf_harness.number(r.get("speedup_vs_hf-eager"), ".2f")),
    ("x hf-static-compile", lambda r: hf_harness.number(r.get("speedup_vs_hf" + STATIC_COMPILE), ".2f")),
    ("generate ms", lambda r: hf_harness.number(r.get("generate_ms"), ".1f")),
    ("tokens = HF eager", _tokens),
    ("graph breaks", lambda r: str(r.get("graph_breaks", "-"))),
    ("first call s", lambda r: f"{r['first_call_s']:.1f}"),
)


def markdown_lines(records: list[dict], new_tokens: int) -> list[str]:
    """The generation section: how it is timed, and one row per provider and mode."""
    return [
        "## Generation",
        "",
        "Wall clock, warm-up excluded. `prefill`: ms of a generate of 1 new token (the prompt's forward into "
        f"the cache); `decode`: ms per new token, in a generate of {new_tokens} new tokens the time from the first "
        f"new token's logits to the last's, over the {new_tokens - 1} decode steps between. Generate ms: the whole "
        f"generate of {new_tokens} new tokens. Tokens = HF eager: the "
        "greedy new tokens equal those of the model as built (dynamic cache, eager). `*-static-compile`: "
        '`cache_implementation="static"` and transformers\' compile of the decode steps, '
        '`CompileConfig(mode="default")` (no CUDA graphs; the prefill runs eagerly). First call: seconds of '
        "the first generate, compile included.",
        "",
        *writer.record_table(COLUMNS, [r for r in records if r["mode"] in MODES]),
    ]
