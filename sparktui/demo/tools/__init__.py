"""Stand-ins for the node tools a simulated node answers with: ip, nvidia-smi, ibdev2netdev, ssh, docker.

Each runs as `python3 -S -m sparktui.demo.tools.<name>` from a launcher on the node's PATH; stdlib only.
"""
