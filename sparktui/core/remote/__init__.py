"""Reaching the nodes: one SSH connection per node, its channels, and what a failure to connect means.

Every remote command passes through `ssh.Node`, which journals it; the rest of the core holds a
`Cluster` and never opens a connection of its own.

- `ssh` — `Node` and `Cluster`: run(), stream(), forward(), reconnect with backoff
- `sshlib` — asyncssh imported without its slow library lookup and deprecation notes
- `channels` — the SSH channel cap per node, lowered when a node refuses one, and what to tell the user
- `procgroup` — shell functions about a detached remote job's process group (model copies, benchmarks)
- `reach` — why a node could not be reached, and what to do, from the words in ssh's error
"""
