"""Every relative link in the README and docs/ lands on a file that exists, and an anchor on a Markdown
page lands on one of its headings (or an explicit <a id>), so moving a section cannot strand a link."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[(?:[^\]`]|`[^`]*`)*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def links(text: str) -> list[str]:
    text = FENCE.sub("", text)  # a code block's brackets are code, not links
    # inline code goes, unless it is a link's text (kept whole, so its closing ` opens no new span)
    text = re.sub(r"`[^`\n]*`(\]\()?", lambda m: m[0] if m[1] else "", text)
    return LINK.findall(text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    text = FENCE.sub("", text)
    found, seen = set(), {}
    for h in re.findall(r"^#{1,6} +(.+?) *#*$", text, re.M):
        base = slug(h)
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found | set(re.findall(r'<a id="([^"]+)"', text))


def test_the_link_finder_sees_links_and_skips_code():
    text = "see [a](docs/a.md#x), ![p](p.svg), [`b`](b.md) and `[no](code.md)`\n```\n[no](block.md)\n```\n"
    assert links(text) == ["docs/a.md#x", "p.svg", "b.md"]
    assert slug("Will this image serve this model?") == "will-this-image-serve-this-model"
    assert slug("`sparktui sync model`") == "sparktui-sync-model"
    assert anchors("## A\n## A\n") == {"a", "a-1"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    text = page.read_text()
    broken = []
    for target in links(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ... are not files here
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)
