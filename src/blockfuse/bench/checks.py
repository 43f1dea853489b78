"""One target check of the project's own benchmarks (their issues' speed, memory and error targets): met,
missed or n/a, with the text that says what was compared. The checks go into each benchmark's JSON, where the
GPU scripts and the tests read them; ``blockfuse report`` shows them only with ``--targets``."""

from __future__ import annotations

CPU_TARGET_TEXT = "a CUDA target, n/a on the CPU"


def check(text: str, value, bound: float, higher_is_better: bool = True, *, cuda_only: bool = False,
          device: str = "cuda", why: str | None = None, spec: str = ".2f", bound_spec: str = "") -> dict:
    """``value`` against ``bound`` (at least it where ``higher_is_better``, else at most it). n/a where
    ``cuda_only`` and ``device`` is not CUDA (a speed or memory target), or where ``value`` is None
    (``why`` says why, when known)."""
    if cuda_only and device != "cuda":
        return {"status": "n/a", "text": f"{text}: {CPU_TARGET_TEXT}", "bound": bound}
    if value is None:
        return {"status": "n/a", "text": f"{text}: not measured" + (f" ({why})" if why else ""), "bound": bound}
    met = value >= bound if higher_is_better else value <= bound
    sign = ">=" if higher_is_better else "<="
    return {"status": "met" if met else "missed", "text": f"{text}: {value:{spec}} ({sign} {bound:{bound_spec}})",
            "value": value, "bound": bound}
