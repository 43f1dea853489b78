"""What ``blockfuse.patch`` did to a model: every module replaced, every one left and why."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

KINDS = ("norms", "rope", "mlp", "loss")


@dataclass(frozen=True)
class PatchEntry:
    kind: str  # "norms", "rope", "mlp" or "loss"
    path: str  # the module's path in the model ("" is the model itself)
    old: str  # what ran before: "LlamaRMSNorm", "LlamaAttention: apply_rotary_pos_emb"
    new: str = ""  # what runs now; "" when skipped
    reason: str = ""  # why it was skipped; "" when replaced


@dataclass
class PatchReport:
    model: str  # the class name of the patched model
    families: tuple[str, ...]  # the families found in it ("Llama", "SigLIP", ...)
    replaced: list[PatchEntry] = field(default_factory=list)
    skipped: list[PatchEntry] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"blockfuse.patch({self.model}; {', '.join(self.families)}): "
                 f"{len(self.replaced)} replaced, {len(self.skipped)} skipped"]
        for verb, entries in (("replaced", self.replaced), ("skipped", self.skipped)):
            for (kind, what), paths in _groups(entries, verb):
                where = paths[0] if len(paths) == 1 else f"{paths[0]} ... {paths[-1]}"
                lines.append(f"  {verb:<8} {kind:<5} {len(paths):>3} x {what}  [{where or '<model>'}]")
        return "\n".join(lines)

    def to_markdown(self) -> str:
        lines = [f"### blockfuse.patch: {self.model} ({', '.join(self.families)})", "",
                 f"{len(self.replaced)} replaced, {len(self.skipped)} skipped.", "",
                 "| | kind | module | before | after / why not |", "|---|---|---|---|---|"]
        for entry in self.replaced:
            lines.append(f"| replaced | {entry.kind} | `{entry.path or '<model>'}` | {entry.old} | {entry.new} |")
        for entry in self.skipped:
            lines.append(f"| skipped | {entry.kind} | `{entry.path or '<model>'}` | {entry.old} | {entry.reason} |")
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict:
        return {"model": self.model, "families": list(self.families),
                "replaced": [asdict(entry) for entry in self.replaced],
                "skipped": [asdict(entry) for entry in self.skipped]}


def _groups(entries: list[PatchEntry], verb: str) -> list[tuple[tuple[str, str], list[str]]]:
    """Entries grouped by (kind, what happened), in order of first appearance."""
    groups: dict[tuple[str, str], list[str]] = {}
    for entry in entries:
        what = f"{entry.old} -> {entry.new}" if verb == "replaced" else f"{entry.old}: {entry.reason}"
        groups.setdefault((entry.kind, what), []).append(entry.path)
    return sorted(groups.items(), key=lambda item: KINDS.index(item[0][0]))
