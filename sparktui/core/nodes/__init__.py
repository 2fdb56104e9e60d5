"""What sparktui knows about each node: probed in one round trip, kept on disk, judged against needs.

- `facts` — `NodeFacts` and its parts as plain dataclasses (the `--json` shape of check/status)
- `probes` — the one shell script per node (`probe_script`) and its parser (`parse_probe`)
- `probe_needs` — parsers for the probe sections on docker, the container toolkit and rsync
- `requirements` — each node's needs, met or not, with the fix in words and commands
- `inventory` — probe every node at once and analyse the network: `Inventory`, `take_inventory`
- `facts_store` — facts kept on this machine with their time, for planning without the nodes
"""
