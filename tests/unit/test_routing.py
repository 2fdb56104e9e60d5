"""The TUI's event routing: each event reaches the handlers marked for its type, owners in the order given."""

from __future__ import annotations

from dataclasses import dataclass

from sparktui.tui.routing import Router, handles


@dataclass
class Up:
    node: str


class UpAgain(Up):
    pass


@dataclass
class Other:
    pass


class Pane:
    def __init__(self, seen: list) -> None:
        self.seen = seen

    @handles(Up)
    def _up(self, e: Up) -> None:
        self.seen.append(("pane", e.node))


class App:
    def __init__(self, seen: list) -> None:
        self.seen = seen

    @handles(Up, Other)
    def _any(self, e) -> None:
        self.seen.append(("app", type(e).__name__))


def test_the_owner_of_the_data_hears_first_then_the_app():
    seen: list = []
    router = Router([Pane(seen), App(seen)])
    assert router.deliver(Up("spark1"))
    assert seen == [("pane", "spark1"), ("app", "Up")]


def test_a_subclass_goes_where_its_base_goes_and_an_unmarked_event_nowhere():
    seen: list = []
    router = Router([Pane(seen), App(seen)])
    assert router.deliver(UpAgain("spark2"))
    assert router.deliver(Other())
    assert not router.deliver("a string")
    assert seen == [("pane", "spark2"), ("app", "UpAgain"), ("app", "Other")]


def test_a_subclass_of_an_owner_keeps_its_handlers_and_an_override_replaces_them():
    seen: list = []

    class Louder(Pane):
        @handles(Up)
        def _up(self, e: Up) -> None:
            self.seen.append(("louder", e.node))

    class Same(Pane):
        pass

    Router([Louder(seen), Same(seen)]).deliver(Up("spark1"))
    assert seen == [("louder", "spark1"), ("pane", "spark1")]
