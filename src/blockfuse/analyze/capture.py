"""Keep the wrapper code Inductor generates while a compiled callable runs, tagged with the step
(inference, forward, backward) that compiled it, and Inductor's provenance tracking where it exists.

The code is taken where ``torch._inductor.utils.run_and_get_code`` takes it
(``GraphLowering.save_output_code``), without that helper's ``torch._dynamo.reset()``, so the
inference and the training graphs of one ``torch.compile`` object are both kept. Provenance (the
post-grad nodes and the user stack traces of each kernel) is read when Inductor dumps it, right
after it wrote that graph's code.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass, field
from unittest import mock

import torch


@dataclass
class Captured:
    phase: str | None
    source: str
    provenance: dict = field(default_factory=dict)


def _settings(device_type: str) -> dict:
    from torch._inductor import config

    settings = {"fx_graph_cache": False}  # NOTE: a cache hit skips codegen, and with it the provenance
    if hasattr(config, "fx_graph_remote_cache"):
        settings["fx_graph_remote_cache"] = False
    if device_type == "cuda":
        settings["benchmark_kernel"] = True  # puts kernel_num_gb / kernel_flop into each kernel's meta
    if hasattr(config.trace, "provenance_tracking_level"):
        settings["trace.provenance_tracking_level"] = 1
    elif hasattr(config.trace, "provenance_tracking"):
        settings["trace.provenance_tracking"] = True
    return settings


class CodeCapture:
    """Context manager: ``records`` holds one :class:`Captured` per compiled graph, in compile order.
    Set ``phase`` before each step so each graph knows which step compiled it."""

    def __init__(self, device_type: str):
        self.device_type = device_type
        self.records: list[Captured] = []
        self.phase: str | None = None
        self.provenance_available = False
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> CodeCapture:
        from torch._inductor import config, debug
        from torch._inductor.graph import GraphLowering

        self._stack.enter_context(config.patch(_settings(self.device_type)))
        try:
            import torch._functorch.config as functorch_config

            if hasattr(functorch_config, "enable_autograd_cache"):
                self._stack.enter_context(functorch_config.patch(enable_autograd_cache=False))
        except ImportError:
            pass
        self._stack.enter_context(mock.patch.object(GraphLowering, "save_output_code", self._save))
        dump = getattr(debug, "dump_inductor_provenance_info", None)
        if dump is not None:
            self.provenance_available = True

            def dump_and_keep(*args, **kwargs):
                result = dump(*args, **kwargs)
                self._keep_provenance()
                return result

            self._stack.enter_context(mock.patch.object(debug, "dump_inductor_provenance_info", dump_and_keep))
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def _save(self, code: str) -> None:
        if not any(record.source == code for record in self.records):
            self.records.append(Captured(self.phase, code))

    def _keep_provenance(self) -> None:
        from torch._inductor import debug

        if not self.records or self.records[-1].provenance:
            return
        self.records[-1].provenance = {
            "post_grad": copy.deepcopy(getattr(debug, "_inductor_triton_kernel_to_post_grad_node_info", {})),
            "stack_traces": copy.deepcopy(getattr(debug, "_inductor_kernel_stack_trace", {})),
        }


def synchronize(device_type: str) -> None:
    if device_type == "cuda":
        torch.cuda.synchronize()
