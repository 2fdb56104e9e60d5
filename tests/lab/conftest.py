"""Lab fixtures: real nodes from network namespaces (see netlab.py). Without root or a needed tool
the lab tests skip with the reason (and tests/conftest.py turns that into a failure under CI=true; it also
marks everything here `lab`)."""

from __future__ import annotations

import pytest

from .netlab import Lab, LabUnavailable, unavailable_reason


def _build(**kw) -> Lab:
    reason = unavailable_reason(kw.get("docker", True))
    if reason:
        pytest.skip(reason)
    try:
        return Lab(**kw).up()
    except LabUnavailable as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def lab():
    """Two nodes (node1 = head), sshd + dockerd on each, shared by the whole test run."""
    lab = _build(nodes=2)
    yield lab
    lab.destroy()


@pytest.fixture(scope="session")
def lab3():
    """Three nodes, built only when a test asks for it."""
    lab = _build(nodes=3)
    yield lab
    lab.destroy()


@pytest.fixture
def make_lab():
    """Factory for a custom lab torn down after the test: make_lab(nodes=1, max_sessions=3, docker=False)."""
    made: list[Lab] = []

    def make(**kw) -> Lab:
        lab = _build(**kw)
        made.append(lab)
        return lab

    yield make
    for lab in made:
        lab.destroy()
