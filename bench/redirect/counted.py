"""A fixed number of requests in a fixed order over keep-alive connections opened beforehand: what
bench/redirect/instructions.py sends between zeroing callgrind's counters and dumping them.

A cell timed by wrk shares its fixed work (connection set-up, the warm-up's tail, timers that fire
by the second) among as many requests as the machine's speed allowed, and picks codes at random:
its count per request moved by ±3% between two runs of one build. Here the connections are open
and warm before the counters are zeroed, every request is one of a list the run always sends in
the same order, and the counters are read only once nginx is idle again, so a cell is the same
requests' instructions every time.
"""

import asyncio
import platform
import re
import time

_LENGTH = re.compile(rb"(?i)\r\ncontent-length: *(\d+)")
_CHUNKED = re.compile(rb"(?i)\r\ntransfer-encoding: *chunked")
# What a process blocked waiting for events shows first in /proc/<pid>/syscall: epoll_wait or
# epoll_pwait's number (arm64 has only the second).
_WAITING = {"aarch64": {"22"}}.get(platform.machine(), {"232", "281"})


def request_bytes(port, path, headers):
    """The request wrk-codes.lua sends (wrk's Host, then the cell's headers): the same bytes as
    the wrk cells of bench/redirect/run, so counts compare with theirs."""
    lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", *headers, "", ""]
    return "\r\n".join(lines).encode()


class Connections:
    """`count` keep-alive connections to 127.0.0.1:`port`, each with one request in flight at most
    (as wrk's connections), sending `headers` (header lines) with every request."""

    def __init__(self, port, count, headers=()):
        self.port, self.count, self.headers = port, count, list(headers)
        self.streams = []

    async def open(self):
        for _ in range(self.count):
            self.streams.append(await asyncio.open_connection("127.0.0.1", self.port))

    async def send(self, paths, n):
        """`n` requests, the i-th for paths[i % len(paths)], request i on connection i % count;
        returns the count of each status answered."""
        statuses = {}
        wire = [request_bytes(self.port, p, self.headers) for p in paths]

        async def one(index, reader, writer):
            for i in range(index, n, self.count):
                writer.write(wire[i % len(wire)])
                head = await reader.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                statuses[status] = statuses.get(status, 0) + 1
                if _CHUNKED.search(head):
                    raise RuntimeError(f"127.0.0.1:{self.port}: a chunked answer to "
                                       f"{wire[i % len(wire)]!r}")
                length = _LENGTH.search(head)
                if length:
                    await reader.readexactly(int(length.group(1)))

        await asyncio.gather(*(one(i, r, w) for i, (r, w) in enumerate(self.streams)))
        return statuses

    async def close(self):
        for _, writer in self.streams:
            writer.close()
        for _, writer in self.streams:
            try:
                await writer.wait_closed()
            except ConnectionError:
                pass
        self.streams = []


def settle(pid, timeout=10.0):
    """Returns once process `pid` waits for events (its last answer's logging and clean-up done),
    so that zeroing or dumping its counters splits no request. Falls back to a pause where
    /proc/<pid>/syscall cannot be read."""
    path = f"/proc/{pid}/syscall"
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            with open(path) as f:
                if f.read().split(" ", 1)[0] in _WAITING:
                    # Twice in a row: a process between two waits shows the first one too.
                    time.sleep(0.01)
                    with open(path) as again:
                        if again.read().split(" ", 1)[0] in _WAITING:
                            return
            time.sleep(0.005)
    except OSError:
        time.sleep(0.3)
        return
    raise RuntimeError(f"process {pid} did not go idle within {timeout:g} s")

