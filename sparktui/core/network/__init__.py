"""The network between the nodes: the subnet that joins them, the fabric, its layout and the ports.

The rendezvous address and every *_SOCKET_IFNAME of a plan come from here; so does the judgement of
whether NCCL uses the fabric at its rate.

- `network` — which IPv4 subnet joins all nodes, and each node's interface, address and RoCE device on it
- `paths` — the bootstrap path (sockets, rendezvous) and the data path (RDMA HCAs), told apart
- `fabric` — the ConnectX ports and their halves, MTU, topology, and the NCCL settings to use them all
- `fabric_live` — what NCCL says it uses per rank (its `NCCL INFO` lines) against what the plan listed
- `ring` — the layout read from the addresses: direct, ring or switch; one subnet or one per half
- `ports` — which TCP ports a plan needs on which node, and who already listens on them
"""
