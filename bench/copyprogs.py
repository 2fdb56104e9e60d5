"""The raw copy programs the transfer benches run on a node with `python3 -c` (stdlib only, so they run
where sparktui is not installed): a TCP receiver writing one file, a sendfile() sender, a plain writer.

    RECEIVER ADDR PORT FILE     listens (PORT 0: any free port), prints the port it got, writes what comes
    SENDER ADDR PORT PATH...    sends each file (a directory: its files, sorted by name) over one connection
    WRITER FILE MB              writes MB MiB of zeros: the destination's own write rate
"""

RECEIVER = r"""import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
with open(sys.argv[3], "wb") as f:
    while True:
        b = c.recv(1 << 20)
        if not b:
            break
        f.write(b)
"""
SENDER = r"""import os, socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
paths = []
for p in sys.argv[3:]:
    paths += [os.path.join(p, n) for n in sorted(os.listdir(p))] if os.path.isdir(p) else [p]
for path in paths:
    with open(path, "rb") as f:
        n, off = os.fstat(f.fileno()).st_size, 0
        while off < n:
            off += os.sendfile(c.fileno(), f.fileno(), off, n - off)
c.close()
"""
WRITER = r"""import sys
b = b"\0" * (1 << 20)
with open(sys.argv[1], "wb") as f:
    for _ in range(int(sys.argv[2])):
        f.write(b)
"""
