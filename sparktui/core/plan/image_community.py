"""Community images known by name: which family a reference belongs to and what that tells before any
inspection (its engine source, Ray, NCCL, the variables it reads, and for a nightly tag its build date).

The facts live with each engine (Engine.community_images); this module only matches a reference to them.
A name is a claim, not a proof: the inspection of the image (core/plan/image.py) still says which release it
holds, and wins where they differ.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..engines import ENGINES
from ..engines.base import CommunityImage

_NIGHTLY = re.compile(r"nightly-(\d{4})(\d{2})(\d{2})\Z")
_HOSTS = ("docker.io/", "index.docker.io/", "registry-1.docker.io/")


@dataclass(frozen=True)
class Known:
    ref: str
    engine: str
    family: CommunityImage
    repo: str  # the family's repository this reference names ("" for a local tag)
    tag: str  # "" when pinned by digest alone
    built: str | None = None  # YYYY-MM-DD of a nightly tag
    pinned: bool = False  # by digest: the same bytes on every node

    def words(self) -> str:
        """One phrase for the plan and the image line."""
        name = self.repo or f"{self.ref} (the local tag of {self.family.repos[0]})"
        when = (
            f"nightly of {self.built}"
            if self.built
            else "digest-pinned"
            if self.pinned
            else "a moving tag: the newest tested nightly, so each node may hold another build"
            if self.tag == "latest"
            else f"tag {self.tag}"
        )
        ray = {True: "Ray installed", False: "no Ray", None: "Ray not known"}[self.family.ray]
        return (
            f"{name}, {when}: {self.family.what}; {ray}; {self.family.nccl}"
            if self.family.nccl
            else (f"{name}, {when}: {self.family.what}; {ray}")
        )

    def to_json(self) -> dict:
        return {
            "ref": self.ref,
            "engine": self.engine,
            "repo": self.repo or self.family.repos[0],
            "tag": self.tag,
            "built": self.built,
            "pinned": self.pinned,
            "ray": self.family.ray,
            "what": self.family.what,
            "tp_all_reduce": self.family.tp_all_reduce or None,
            "env": dict(self.family.env),
            "source": self.family.source,
        }


def _split(ref: str) -> tuple[str, str, bool]:
    """(repository without a Docker Hub host, tag, pinned by digest)."""
    name, _, digest = ref.partition("@")
    for host in _HOSTS:
        name = name.removeprefix(host)
    last = name.rsplit("/", 1)[-1]
    repo, tag = name.rsplit(":", 1) if ":" in last else (name, "" if digest else "latest")
    return repo, tag, bool(digest)


def recognise(ref: str | None) -> Known | None:
    """The community family `ref` names, or None for any other image."""
    if not ref:
        return None
    repo, tag, pinned = _split(ref.strip())
    for e in ENGINES.values():
        for fam in e.community_images:
            if repo in fam.repos or (repo in fam.local_tags and "/" not in repo):
                m = _NIGHTLY.match(tag)
                return Known(
                    ref=ref,
                    engine=e.name,
                    family=fam,
                    repo=repo if repo in fam.repos else "",
                    tag=tag,
                    built=f"{m[1]}-{m[2]}-{m[3]}" if m else None,
                    pinned=pinned,
                )
    return None
