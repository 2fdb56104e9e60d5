"""asyncssh, imported without the compiler runs its library lookup would start, and without the
deprecation notes its own import triggers.

At import, asyncssh asks ctypes.util.find_library for liboqs (only needed for the sntrup761 key
exchange; ML-KEM comes with cryptography). Where the linker cache lacks it, find_library goes on to
run gcc and then ld: on a 2-core laptop about 80 ms of CPU and 30-70 ms of every start of a
command that talks to a node. Here the lookup asks the linker cache only (`ldconfig -p`, what
find_library tries first), for the length of that one import.
"""

from __future__ import annotations

import ctypes.util
import sys
import warnings


def _quiet_dsa() -> None:
    """cryptography 51 deprecates DSA, and asyncssh's type hints touch it at import: ten warning lines
    above every command's output. Only that warning, only from asyncssh's modules, is silenced."""
    try:
        from cryptography.utils import CryptographyDeprecationWarning
    except ImportError:  # an older cryptography: nothing to silence
        return
    warnings.filterwarnings(
        "ignore", message="DSA is deprecated", category=CryptographyDeprecationWarning, module=r"asyncssh(\.|$)"
    )


def _load():
    if "asyncssh" in sys.modules:
        return sys.modules["asyncssh"]
    full = ctypes.util.find_library
    cache_only = getattr(ctypes.util, "_findSoname_ldconfig", None)  # CPython's first step on Linux
    if cache_only is not None and sys.platform.startswith("linux"):
        ctypes.util.find_library = cache_only
    _quiet_dsa()
    try:
        import asyncssh
    finally:
        ctypes.util.find_library = full
    return asyncssh


asyncssh = _load()
