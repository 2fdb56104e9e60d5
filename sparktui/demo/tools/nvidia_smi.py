"""`nvidia-smi` on a simulated DGX Spark (GB10): memory reads [N/A] / "Not Supported", as NVML says
NOT_SUPPORTED for unified memory; utilization, temperature and power read normally. The engines
running in the node's containers are its compute apps."""

from __future__ import annotations

import json
import re
import sys
import time

from ..hardware import load, node_dir

NA = "[N/A]"
FIELDS = {
    # field: (value, unit shown without nounits)
    "index": ("0", ""),
    "count": ("1", ""),
    "name": (None, ""),
    "gpu_name": (None, ""),
    "uuid": (None, ""),
    "gpu_uuid": (None, ""),
    "pci.bus_id": (None, ""),
    "gpu_bus_id": (None, ""),
    "driver_version": (None, ""),
    "memory.total": (NA, ""),
    "memory.used": (NA, ""),
    "memory.free": (NA, ""),
    "memory.reserved": (NA, ""),
    "utilization.gpu": (None, " %"),
    "utilization.memory": (NA, ""),
    "temperature.gpu": (None, ""),
    "power.draw": (None, " W"),
    "power.limit": (NA, ""),
    "power.max_limit": (NA, ""),
    "pstate": (None, ""),
    "compute_cap": ("12.1", ""),
    "persistence_mode": ("Enabled", ""),
    "fan.speed": (NA, ""),
    "clocks.sm": (None, " MHz"),
    "clocks.max.sm": ("3003", " MHz"),
    "clocks.mem": (NA, ""),
    "serial": ("1654925001234", ""),
    "vbios_version": (NA, ""),
    "mig.mode.current": (NA, ""),
    "display_active": ("Enabled", ""),
    "ecc.mode.current": (NA, ""),
    "compute_mode": ("Default", ""),
}
APP_FIELDS = ("pid", "process_name", "used_memory", "gpu_uuid", "gpu_name", "gpu_bus_id")
_MEM_USE = re.compile(r"mem usage=(\d+(?:\.\d+)?) GB|model weights took (\d+(?:\.\d+)?) GiB")


def _engines() -> list[dict]:
    """Running containers of this node whose command is an engine, with the memory their log reports."""
    out = []
    root = node_dir() / "docker" / "containers"
    if not root.is_dir():
        return out
    for d in root.iterdir():
        try:
            state = json.loads((d / "state.json").read_text())
            config = json.loads((d / "config.json").read_text())
        except (OSError, ValueError):
            continue
        cmd = " ".join([config.get("Path", ""), *config.get("Args", [])])
        if state.get("Status") != "running" or not any(k in cmd for k in ("sglang", "vllm", "ray")):
            continue
        gib = 0.0
        try:
            with (d / "log.json").open("rb") as f:
                f.seek(max(0, (d / "log.json").stat().st_size - 400_000))
                for m in _MEM_USE.finditer(f.read().decode(errors="replace")):
                    gib = float(m[1] or m[2])
        except OSError:
            pass
        out.append({"pid": state.get("Pid", 0), "name": "python3", "mib": int(gib * 1024) + (512 if gib else 0)})
    return out


def _values(node: dict, busy: bool) -> dict[str, str]:
    g = node["gpu"]
    util = "3" if busy else "0"
    return {
        "name": g["name"],
        "gpu_name": g["name"],
        "uuid": g["uuid"],
        "gpu_uuid": g["uuid"],
        "pci.bus_id": g["bus_id"],
        "gpu_bus_id": g["bus_id"],
        "driver_version": g["driver"],
        "utilization.gpu": util,
        "temperature.gpu": "47" if busy else "41",
        "power.draw": "24.31" if busy else "4.12",
        "pstate": "P0" if busy else "P8",
        "clocks.sm": "2418" if busy else "208",
    }


def query(fields: list[str], fmt: set[str], node: dict) -> str:
    unknown = [f for f in fields if f not in FIELDS]
    if unknown:
        sys.stderr.write(f'Field "{unknown[0]}" is not a valid field to query.\n\n')
        raise SystemExit(2)
    vals = _values(node, bool(_engines()))
    row = []
    for f in fields:
        v, unit = FIELDS[f]
        v = vals.get(f, v) if v is None else v
        row.append(v if "nounits" in fmt or v.startswith("[") else v + unit)
    out = (
        ""
        if "noheader" in fmt
        else ", ".join(f + (f" [{FIELDS[f][1].strip()}]" if FIELDS[f][1] else "") for f in fields) + "\n"
    )
    return out + ", ".join(row) + "\n"


def apps(fields: list[str], fmt: set[str], node: dict) -> str:
    unknown = [f for f in fields if f not in APP_FIELDS]
    if unknown:
        sys.stderr.write(f'Field "{unknown[0]}" is not a valid field to query.\n\n')
        raise SystemExit(2)
    lines = [] if "noheader" in fmt else [", ".join(f + (" [MiB]" if f == "used_memory" else "") for f in fields)]
    for e in _engines():
        vals = {
            "pid": str(e["pid"]),
            "process_name": e["name"],
            "used_memory": str(e["mib"]) + ("" if "nounits" in fmt else " MiB"),
            "gpu_uuid": node["gpu"]["uuid"],
            "gpu_name": node["gpu"]["name"],
            "gpu_bus_id": node["gpu"]["bus_id"],
        }
        lines.append(", ".join(vals[f] for f in fields))
    return "".join(line + "\n" for line in lines)


def table(node: dict) -> str:
    g = node["gpu"]
    engines = _engines()
    busy = bool(engines)
    v = _values(node, busy)
    bar = "+-----------------------------------------------------------------------------------------+"
    out = [
        time.strftime("%a %b %d %H:%M:%S %Y       "),
        bar,
        f"| NVIDIA-SMI {g['driver']:<22} Driver Version: {g['driver']:<14} CUDA Version: {g['cuda']:<9}|",
        "+-----------------------------------------+------------------------+----------------------+",
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        "|=========================================+========================+======================|",
        f"|   0  {g['name']:<26}  On  |   {g['bus_id']}  On |                  N/A |",
        f"| N/A   {v['temperature.gpu']}C    {v['pstate']}           {float(v['power.draw']):>5.0f}W /  N/A  | "
        f"Not Supported          | {v['utilization.gpu']:>6}%      Default |",
        "|                                         |                        |                  N/A |",
        "+-----------------------------------------+------------------------+----------------------+",
        "",
        bar,
        "| Processes:                                                                              |",
        "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
        "|        ID   ID                                                               Usage      |",
        "|=========================================================================================|",
    ]
    if not engines:
        out.append("|  No running processes found                                                             |")
    for e in engines:
        out.append(f"|    0   N/A  N/A     {e['pid']:>12}      C   {e['name']:<34} {e['mib']:>8}MiB |")
    out.append(bar)
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    node = load()
    fmt: set[str] = set()
    gpu_fields: list[str] | None = None
    app_fields: list[str] | None = None
    args = list(argv)
    while args:
        a = args.pop(0)
        if a.startswith("--query-gpu="):
            gpu_fields = [f.strip() for f in a.split("=", 1)[1].split(",") if f.strip()]
        elif a.startswith("--query-compute-apps="):
            app_fields = [f.strip() for f in a.split("=", 1)[1].split(",") if f.strip()]
        elif a.startswith("--format="):
            fmt = {f.strip() for f in a.split("=", 1)[1].split(",")}
        elif a in ("-L", "--list-gpus"):
            sys.stdout.write(f"GPU 0: {node['gpu']['name']} (UUID: {node['gpu']['uuid']})\n")
            return 0
        elif a in ("-i", "--id") and args:
            if args.pop(0) not in ("0", node["gpu"]["uuid"], node["gpu"]["bus_id"]):
                sys.stderr.write("No devices were found\n")
                return 6
        elif a.startswith("--id=") or a in ("-q", "--query"):
            continue
        elif a in ("-h", "--help"):
            sys.stdout.write("NVIDIA System Management Interface -- v" + node["gpu"]["driver"] + "\n")
            return 0
        else:
            sys.stderr.write("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n")
            return 2
    if (gpu_fields is not None or app_fields is not None) and "csv" not in fmt:
        sys.stderr.write("--format is required with --query-gpu / --query-compute-apps\n")
        return 2
    if gpu_fields is not None:
        sys.stdout.write(query(gpu_fields, fmt, node))
    elif app_fields is not None:
        sys.stdout.write(apps(app_fields, fmt, node))
    else:
        sys.stdout.write(table(node))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
