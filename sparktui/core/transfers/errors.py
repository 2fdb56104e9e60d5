"""Transfer failures, each with a plain sentence for the user."""

from __future__ import annotations


class TransferError(Exception):
    """A transfer cannot start or did not finish; str() says why and what to do."""


class TransferBusy(TransferError):
    """A transfer to that destination is already running."""

    def __init__(self, message: str, running_id: str):
        super().__init__(message)
        self.running_id = running_id


class TrustMissing(TransferError):
    """The source node cannot log in to the destination without a prompt."""

    def __init__(self, source: str, dest: str, target: str, reason: str):
        self.source, self.dest, self.target, self.reason = source, dest, target, reason
        super().__init__(
            f"{source} cannot log in to {dest} as {target} without a prompt ({reason}). "
            f"Run `sparktui setup trust` to create a key on {source} if it has none, add it to "
            f"{dest}'s ~/.ssh/authorized_keys and record {dest}'s host key in {source}'s "
            f"~/.ssh/known_hosts. By hand, on {source}: `ssh-keygen -t ed25519` (if no key), "
            f"`ssh-copy-id {target}`, then check with `ssh -o BatchMode=yes {target} true`."
        )
