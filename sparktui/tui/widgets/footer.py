"""The footer, fitted to the screen's width: full words when they fit, the registry's short words
when not, and only then the least essential keys left out (help and the palette keep them all)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from .. import actions


def _width(keys: list[FooterKey]) -> int:
    # a compact key is "k Word"; one cell between keys
    return sum(len(k.key_display) + 1 + len(k.description) for k in keys) + max(0, len(keys) - 1)


class FitFooter(Footer):
    def __init__(self, **kw) -> None:
        super().__init__(compact=True, show_command_palette=False, **kw)  # the palette is a registry key
        self._fitted_to = 0

    def compose(self) -> ComposeResult:
        keys = [w for w in super().compose() if isinstance(w, FooterKey)]
        room = self._fitted_to = self.app.size.width
        if _width(keys) > room:
            for k in keys:
                a = actions.BY_ACTION.get(k.action)
                if a is not None and a.short:
                    k.description = a.short
        for drop in actions.FOOTER_DROP_ORDER:
            if _width(keys) <= room:
                break
            keys = [k for k in keys if k.action != actions.BY_ID[drop].action]
        yield from keys

    def on_resize(self) -> None:
        if self.app.size.width != self._fitted_to:  # only a new width: a recompose resizes too
            self.refresh(recompose=True)
