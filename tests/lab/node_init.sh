#!/bin/bash
# First process of a lab node (run by tini, as PID 1's child, in the node's new mount, UTS and PID
# namespaces, inside its network namespace). It gives the node its own /sys, /proc (and meminfo), /run, /root,
# /models, /tmp, /var/lib/docker and /usr/local/sbin, prints "ready", then waits to be killed.
# Usage: node_init.sh NODE_DIR NAME [DOCKER_TMPFS_SIZE]
set -euo pipefail
D=$1
NAME=$2
DOCKER_TMPFS=${3:-}

# A fresh sysfs shows this node's network devices; it would hide the cgroup hierarchies dockerd
# needs (the trap of `ip netns exec`), so they are carried over with a recursive bind and a move.
mount --rbind /sys/fs/cgroup "$D/cgroup"
mount -t sysfs sysfs /sys
mount --move "$D/cgroup" /sys/fs/cgroup
mount -t proc proc /proc

mount -t tmpfs -o mode=755,size=256m tmpfs /run
mkdir -p /run/sshd /run/lab /run/nvidia-sim
mount --bind "$D/lab" /run/lab
# A Spark's memory, not this machine's: the free-memory checks read it (Lab.set_meminfo changes it).
mount --bind /run/lab/meminfo /proc/meminfo
cp /run/lab/gpu-uuid /run/nvidia-sim/uuid 2>/dev/null || true

# Engines share memory through /dev/shm (`--ipc host` gives containers the node's): one per node.
mount -t tmpfs -o mode=1777,size=2g shm /dev/shm
mount --bind "$D/root" /root
mount --bind "$D/models" /models
if [ -n "$DOCKER_TMPFS" ]; then
  # a real engine's GBs of image in memory: the host's disk frees blocks slowly (discard), and a tmpfs
  # goes with the node's namespace
  mount -t tmpfs -o "mode=711,size=$DOCKER_TMPFS" docker /var/lib/docker
else
  mount --bind "$D/docker" /var/lib/docker
fi
mount --bind "$D/sbin" /usr/local/sbin
mount --bind "$D/tmp" /tmp  # last: $D lives under the host's /tmp
hostname "$NAME"
echo ready
exec sleep infinity
