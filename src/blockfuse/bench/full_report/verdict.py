"""What ``blockfuse report`` tells its user last: which provider to use on this card, from the numbers it
measured (not from the project's targets, which only ``--targets`` shows).

A question is answered by the provider with the smallest figure among the records of one part and mode that
ran, did not fail and are not noisy (``writer.noisy``): the fastest training step, the fastest inference
forward (the block, and the 4-layer model), the lowest peak training memory, the fastest RoPE. Each answer
carries the provider's relative error against fp32 beside it, its figure against eager's, and the runner-up.
"""

from __future__ import annotations

from blockfuse.bench.writer import noisy, number, table

# (key, question, part, mode, figure's field, its unit, the error field, which error that is)
QUESTIONS = (
    ("training", "training (forward + backward)", "block", "fwdbwd", "ms", "ms", "rel_err_grad", "gradients"),
    ("inference", "inference (forward, no grad)", "block", "infer", "ms", "ms", "rel_err_out", "output"),
    ("model_inference", "inference of the 4-layer model", "surgical", "infer", "ms", "ms", "rel_err_out", "output"),
    ("memory", "memory (peak of a training step)", "block", "fwdbwd", "peak_mib", "MiB", "rel_err_grad",
     "gradients"),
    ("rope", "RoPE alone (forward)", "rope", "fwd", "ms", "ms", "rel_err_out", "output"),
)


def _answer(records: list[dict], mode: str, field: str, unit: str, error_field: str) -> dict:
    ran = [r for r in records if r.get("mode") == mode and not r.get("error") and r.get(field) is not None]
    shaky = [r["provider"] for r in ran if field == "ms" and noisy(r)]
    ranked = sorted((r for r in ran if r["provider"] not in shaky), key=lambda r: r[field])
    answer = {"provider": None, "unit": unit, "noisy": shaky}
    if not ranked:
        answer["why"] = "noisy timings only" if shaky else "not measured"
        return answer
    best = ranked[0]
    eager = next((r for r in ranked if r["provider"] == "eager"), None)
    answer.update(provider=best["provider"], value=best[field], error=best.get(error_field),
                  vs_eager=eager[field] / best[field] if eager and best[field] else None)
    if len(ranked) > 1:
        answer["runner_up"] = {"provider": ranked[1]["provider"], "value": ranked[1][field],
                               "error": ranked[1].get(error_field)}
    return answer


def verdict(document: dict) -> dict:
    """Per question (``QUESTIONS``) of the parts that ran: ``{question, provider, value, unit, error, error_of,
    vs_eager, runner_up, noisy}``, or ``provider`` None and ``why``; ``cpu``: the run was on the CPU."""
    cpu = document["meta"].get("device") != "cuda"
    answers = {}
    for key, question, part, mode, field, unit, error_field, error_of in QUESTIONS:
        entry = document["parts"].get(part) or {}
        if entry.get("status") != "ok":
            continue
        answer = _answer(entry["result"].get("records", []), mode, field, unit, error_field)
        if cpu and field == "peak_mib" and answer["provider"] is None:
            answer["why"] = "CUDA memory: not measured on the CPU"
        answers[key] = {"question": question, "error_of": error_of, **answer}
    return {"cpu": cpu, "answers": answers}


def _figure(answer: dict) -> str:
    spec = ".0f" if answer["unit"] == "MiB" else ".4g"
    return f"{number(answer.get('value'), spec)} {answer['unit']}"


def rows(found: dict) -> list[list[str]]:
    """A row per question: question, provider, figure (x eager), error, runner-up; a question with no answer:
    "none", no figure, and why in the error's place."""
    result = []
    for answer in found["answers"].values():
        if answer["provider"] is None:
            result.append([answer["question"], "none", "", answer["why"], ""])
            continue
        ratio = answer.get("vs_eager")
        figure = _figure(answer) + (f" ({ratio:.2f}x eager)" if ratio and answer["provider"] != "eager" else "")
        error = f"{number(answer.get('error'), '.2e', 'n/a')} ({answer['error_of']})"
        second = answer.get("runner_up")
        runner_up = (f"{second['provider']}: {_figure({**answer, 'value': second['value']})}, error "
                     f"{number(second.get('error'), '.2e', 'n/a')}" if second else "")
        result.append([answer["question"], answer["provider"], figure, error, runner_up])
    return result


HEADER = ("for", "use", "measured", "error vs fp32", "runner-up")


def markdown_lines(found: dict) -> list[str]:
    """The report's last section: the verdict table and what it rests on."""
    if not found["answers"]:
        return ["No part with records ran: no verdict."]
    lines = ["The provider with the smallest figure in each question, among those that ran without error and "
             "whose timing is not noisy; the error is its relative error against an fp32 run with the same "
             "weights (of the output, or of every gradient together).", ""]
    if found["cpu"]:
        lines += ["**On the CPU**: small shapes, wall-clock times; this checks the harness and is no verdict for "
                  "a GPU. Run `blockfuse report` on the card you mean to use.", ""]
    lines += table(HEADER, [[question, f"**{provider}**" if figure else provider, figure, *rest]
                            for question, provider, figure, *rest in rows(found)])
    left_out = sorted({p for answer in found["answers"].values() for p in answer["noisy"]})
    if left_out:
        lines += ["", f"Left out as noisy (p80 > 2x p20) in some question: {', '.join(left_out)}."]
    return lines
