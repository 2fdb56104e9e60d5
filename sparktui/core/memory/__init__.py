"""Unified memory on the nodes, watched from container start to serving.

On a GB10 the GPU and the OS share one pool, and a launch that takes too much of it can wedge the host
until a power cycle (the driver allocates on the kernel's side, so no container limit bounds it). This
package reads every node's memory over the connection sparktui already holds, judges it against a floor
and a pressure limit, and says when to stop first.

- `limits` — the `memory:` config values (a floor as a size or a share of MemTotal) turned into bytes
- `sample` — one reading of a node (/proc/meminfo, /proc/pressure/memory) as `MemSample`
- `reader` — `MemReader`, one long-lived remote shell per node that answers each request with both files
- `guard` — `Guard`, the verdict on each reading (ok, warn, stop, unwatched) and the fall rate; `advice`
- `status` — one reading per node for `sparktui status`, and the JSON shape of a node's memory
- `free` — is there free memory for the engine on each node now, page cache counted; dropping caches
"""
