"""Why a node could not be reached, and what to do about it, from the words ssh.Node puts in its error."""

from __future__ import annotations

# (words in the error, why in plain words, the way out); the first that matches wins
_CAUSES = (
    (
        "connection refused",
        "nothing accepts SSH connections at the node's host and port",
        "start sshd on the node, or correct its host and port in the config",
    ),
    (
        "no answer within",
        "the node did not answer in time: it is off, unplugged or at another address",
        "power the node up or correct its host in the config; `ping HOST` tells which",
    ),
    (
        "login refused",
        "the node refused the SSH login",
        "check the node's user and key in the config: `ssh -i KEY USER@HOST` must log in without a password",
    ),
    (
        "cannot resolve",
        "the node's host name does not resolve",
        "correct the node's host in the config, or add the name to DNS or /etc/hosts",
    ),
    (
        "no route to host",
        "this machine has no route to the node",
        "check this machine's network and the node's address",
    ),
    (
        "network is unreachable",
        "this machine has no route to the node",
        "check this machine's network and the node's address",
    ),
)


def why_unreachable(texts: list[str]) -> tuple[str | None, str | None]:
    """(why, fix) for errors that say a node was not reached; (None, None) when none does in known words."""
    low = " ".join(texts).lower()
    for words, why, fix in _CAUSES:
        if words in low:
            return why, fix
    return None, None
