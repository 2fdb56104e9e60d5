"""Which collective carries a plan's tensor-parallel all-reduces across nodes, and what that changes in the
fabric's judgement.

NCCL carries them unless the env turns on an image's own (Engine.tp_collectives: the b12x image's RoCE
all-reduce, VLLM_ENABLE_ROCE_ALLREDUCE=1, which takes those up to VLLM_ROCE_ALLREDUCE_MAX_SIZE and leaves
the larger ones to NCCL). Decode's all-reduces are small (a few tokens' hidden states), so there the
decode speed does not hang on NCCL's bandwidth: the fabric warnings say so instead of blaming NCCL for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .image_community import Known, recognise


@dataclass
class Collectives:
    carried_by: dict | None = None  # Engine.tp_collectives' answer, with "active"; None: NCCL carries them all
    known: Known | None = None  # the image's community family, when its name tells one
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return bool(self.carried_by and self.carried_by.get("active"))

    def limit(self) -> str:
        return (self.carried_by or {}).get("max_size") or "its default size"

    def nccl_scope(self) -> str:
        """What NCCL still carries when another collective takes decode's all-reduces; "" when NCCL takes all."""
        if not self.active:
            return ""
        return (
            f"NCCL carries only the all-reduces above {self.limit()} here (prefill, large batches); decode's "
            f"go over the {self.carried_by['all_reduce']}, so NCCL's bandwidth does not bound decode speed"
        )

    def line(self) -> str | None:
        """One line for the plan: how TP all-reduces cross nodes."""
        c = self.carried_by
        if not c:
            return None
        if not c.get("active"):
            return f"TP all-reduce: NCCL ({c['env']} has no effect here)"
        return f"TP all-reduce: {c['all_reduce']} up to {self.limit()}, {c['above']} above ({c['env']})"

    def to_json(self) -> dict | None:
        if not self.carried_by and not self.known:
            return None
        return {
            "tp_all_reduce": dict(self.carried_by) if self.carried_by else {"by": "NCCL"},
            "image": self.known.to_json() if self.known else None,
        }


def judge(engine_mod, image: str, env: dict[str, str], nodes: int) -> Collectives:
    out = Collectives(known=recognise(image))
    if out.known is not None:
        out.notes.append(f"image {out.known.words()}")
    if engine_mod is None:
        return out
    c = engine_mod.tp_collectives(env, out.known)
    if c is None:
        return out
    c = dict(c, active=True)
    if c.get("carried") is False:
        c["active"] = False
        others = [f.repos[0] for f in engine_mod.community_images if f.tp_all_reduce]
        where = f"; the RoCE all-reduce is in {', '.join(others)}" if others else ""
        out.warnings.append(
            f"{c['env']}: {image} does not read it ({out.known.family.what}), so NCCL carries every all-reduce{where}"
        )
    elif nodes < 2:
        c["active"] = False
        out.notes.append(
            f"{c['env']}: one node, so the {c['all_reduce']} stays off (it serves TP groups that span nodes)"
        )
    out.carried_by = c
    return out
