"""vLLM's Ray executor: find the cluster as ray.init() does, get a placement group, place the workers.

The placement group's first bundle must sit on the driver's own IP (`node:VLLM_HOST_IP`); the others
take free GPUs, driver's node first. Without a fitting cluster vLLM waits, reporting at 10, 30, 70,
150 ... seconds, and gives up after 1800 seconds, as the real one does.
"""

from __future__ import annotations

import asyncio
import os
import random
import time

from . import clock, gpu, ray_env, runtime
from .logfmt import ray_cpp_line, ray_line
from .ray_gcs import GcsClient, read_current_cluster, split_address

PG_WAIT_TIMEOUT_S = 1800.0


class Placement:
    """Where one worker (one GPU) runs: its global rank, node IP, and whether that node is remote."""

    def __init__(self, rank: int, ip: str, remote: bool, node: dict | None = None) -> None:
        self.rank, self.ip, self.remote, self.node = rank, ip, remote, node
        self.pid = random.randint(2000, 60000)


class RayPlacement:
    """Mixed into VllmServer: uses its log, args, world, driver_ip, placements and engine_failed()."""

    def ray_address(self) -> str | None:
        if clock.active("no-ray-cluster"):
            return None
        addr = os.environ.get("RAY_ADDRESS")
        if addr and addr != "auto":
            return addr
        return read_current_cluster()

    async def setup_ray(self) -> int:
        self.driver_ip = self.vllm_host_ip()
        address = self.ray_address()
        if address is None:
            await clock.pause(3.0)
            ray_line("INFO", "worker.py:1951", "Started a local Ray instance.")
            nodes = [
                {
                    "node_id": "local",
                    "ip": self.driver_ip,
                    "resources": {"GPU": float(gpu.gpus_per_node())},
                    "nccl_port": 0,
                }
            ]
            return await self.wait_placement(lambda: self._local_nodes(nodes))
        host, port = split_address(address)
        ray_line("INFO", "worker.py:1778", f"Connecting to existing Ray cluster at address: {host}:{port}...")
        self.gcs = GcsClient()
        try:
            await self.gcs.connect(host, port, time.monotonic() + clock.scaled(5.0))
        except TimeoutError:
            ray_cpp_line(
                "W", "rpc_client.h:153", f"Failed to connect to GCS at address {host}:{port} within 5 seconds."
            )
            try:
                await self.gcs.connect(host, port, time.monotonic() + clock.scaled(55.0))
            except TimeoutError:
                ray_cpp_line(
                    "W",
                    "gcs_client.cc:210",
                    "Failed to get cluster ID from GCS server: TimedOut: Timed out "
                    "while waiting for GCS to become available.",
                )
                self.log.raw(
                    f"ConnectionError: GCS has not started yet or is not reachable at {host}:{port}.",
                    who=f"EngineCore_DP0 pid={self.log.pid + 1}",
                )
                return self.engine_failed()
        ray_line("INFO", "worker.py:1951", "Connected to Ray cluster. View the dashboard at 127.0.0.1:8265 ")
        return await self.wait_placement(self._cluster_nodes)

    async def _local_nodes(self, nodes: list[dict]) -> tuple[list[dict], dict]:
        return nodes, {}

    async def _cluster_nodes(self) -> tuple[list[dict], dict]:
        assert self.gcs is not None
        reply = await self.gcs.request({"op": "nodes"})
        return reply.get("nodes") or [], reply.get("used") or {}

    def plan_bundles(self, nodes: list[dict], used: dict) -> list[dict] | None:
        """First bundle on the driver's node (node:IP), the others packed onto free GPUs, driver first."""
        free = {n["node_id"]: float(n["resources"].get("GPU", 0)) - float(used.get(n["node_id"], 0)) for n in nodes}
        driver = [n for n in nodes if n["ip"] == self.driver_ip]
        if not driver or free[driver[0]["node_id"]] < 1:
            return None
        order = driver + sorted((n for n in nodes if n is not driver[0]), key=lambda n: (not n.get("is_head"), n["ip"]))
        picked = []
        for n in order:
            while free[n["node_id"]] >= 1 and len(picked) < self.world:
                free[n["node_id"]] -= 1
                picked.append(n)
        return picked if len(picked) == self.world else None

    async def wait_placement(self, fetch) -> int:
        specs = [{"GPU": 1.0, f"node:{self.driver_ip}": 0.001}] + [{"GPU": 1.0}] * (self.world - 1)
        nodes, used = await fetch()
        total = sum(float(n["resources"].get("GPU", 0)) for n in nodes)
        if self.world > total:
            self.log.core(
                "WARNING",
                "ray_utils.py:402",
                "The number of required GPUs exceeds the total number of available GPUs in the placement group.",
            )
        started = time.monotonic()
        report_at, interval = 10.0, 10.0
        while True:
            picked = self.plan_bundles(nodes, used)
            if picked is not None:
                if self.gcs is None or (
                    await self.gcs.request({"op": "reserve", "bundles": [n["node_id"] for n in picked]})
                ).get("ok"):
                    break
            waited = (time.monotonic() - started) * clock.speed()
            if waited >= PG_WAIT_TIMEOUT_S:
                self.log.raw(
                    runtime.traceback_text(
                        [
                            (
                                f"{runtime.PY}/vllm/v1/executor/ray_utils.py",
                                323,
                                "_wait_until_pg_ready",
                                "raise ValueError(",
                            ),
                        ],
                        f"ValueError: Cannot provide a placement group of placement_group_specs={specs} within "
                        f"{int(PG_WAIT_TIMEOUT_S)} seconds. See `ray status` and `ray list nodes` to make sure the cluster "
                        "has enough resources.",
                    ),
                    who=f"EngineCore_DP0 pid={self.log.pid + 1}",
                )
                return self.engine_failed()
            if waited >= report_at:
                interval *= 2
                report_at += interval
                self.log.core(
                    "INFO",
                    "ray_utils.py:309",
                    f"Waiting for creating a placement group of specs for "
                    f"{int(waited)} seconds. specs={specs}. Check `ray status` and `ray list nodes` to see if "
                    "you have enough resources, and make sure the IP addresses used by ray cluster are the "
                    "same as VLLM_HOST_IP environment variable specified in each node if you are running on "
                    "a multi-node.",
                )
            await asyncio.sleep(min(0.5, clock.scaled(1.0)))
            nodes, used = await fetch()
        self.placements = [Placement(r, n["ip"], n["ip"] != self.driver_ip, n) for r, n in enumerate(picked)]
        return 0

    async def copy_env_to_workers(self) -> bool:
        """Send the driver's environment to the Ray workers as vLLM does; False when a worker's NCCL
        interface, copied from the head, names nothing on its own node (NCCL fails at bootstrap)."""
        skip, warning = ray_env.non_carry_over()
        if warning:
            self.api_or_core("WARNING", "ray_env.py:25", warning)
        self.api_or_core("INFO", "ray_env.py:102", f"Env var prefixes to copy: {sorted(ray_env.PREFIXES)}")
        names = sorted(k for k in ray_env.copied() if k in os.environ)
        self.api_or_core("INFO", "ray_env.py:103", f"Copying the following environment variables to workers: {names}")
        if skip:
            self.api_or_core("INFO", "ray_env.py:109", f"RAY_NON_CARRY_OVER_ENV_VARS from config: {skip}")
        self.api_or_core(
            "INFO", "ray_env.py:113", f"To exclude env vars from copying, add them to {ray_env.config_file()}"
        )
        for p in self.placements:
            if not p.remote or p.node is None:
                continue
            want, have = ray_env.worker_ifname(p.node), p.node.get("ifaces") or []
            if want and have and not ray_env.ifname_matches(want, have):
                self.log.raw(
                    f"{p.node.get('hostname', 'node')}:{p.pid}:{p.pid} [0] NCCL INFO NCCL_SOCKET_IFNAME "
                    f"set by environment to {want}",
                    who=self.worker_tag(p),
                )
                self.log.raw(
                    f"{p.node.get('hostname', 'node')}:{p.pid}:{p.pid} [0] NCCL WARN Bootstrap : no "
                    f"socket interface found",
                    who=self.worker_tag(p),
                )
                self.wlog(
                    p,
                    "ERROR",
                    "worker_base.py:620",
                    "Error executing method 'init_device'. This might cause deadlock in distributed execution.",
                )
                self.log.raw(
                    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
                    "ProcessGroupNCCL.cpp:3353, internal error - please report this issue to the NCCL "
                    "developers, NCCL version 2.27.3\nncclInternalError: Internal check failed.\nLast "
                    "error:\nBootstrap : no socket interface found",
                    who=self.worker_tag(p),
                )
                return False
        return True
