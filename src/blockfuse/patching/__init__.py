"""One-line patching of Hugging Face ``transformers`` models with blockfuse's fused ops.

    report = blockfuse.patch(model)            # norms, RoPE and gated MLPs, in place
    print(report)                              # what was replaced, what was left and why
    blockfuse.unpatch(model)                   # back to the original modules, exactly

Weights are untouched: the patched modules hold the very same ``nn.Parameter`` objects, so the
state dict, ``save_pretrained`` / ``from_pretrained`` and ``load_state_dict`` work as before.
"""

from blockfuse.patching.apply import patch, unpatch
from blockfuse.patching.families import FAMILIES, Family
from blockfuse.patching.report import PatchEntry, PatchReport

__all__ = ["FAMILIES", "Family", "PatchEntry", "PatchReport", "patch", "unpatch"]
