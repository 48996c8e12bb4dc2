#!/usr/bin/env python3
"""Writes, as Redis protocol for `redis-cli --pipe`, COUNT visits of the given codes in the stream
entries nginx's module appends (wire/src/event: `XADD sl:events * v <batch>`, format 6, at most 512
visits an entry), so a sidecar's visit consumer stores them as it would a million redirects',
without the nginx, the module's build and the load generator a real million would need.

Usage: visits.py COUNT HOST CODE... > visits.resp
"""
import sys
import time

FORMAT = 6
FIELDS = 13  # c t s ip ua ref host lang rule id o ws sig (wire/src/event/visit.rs VISIT_FIELDS)
PER_ENTRY = 512  # BATCH_MAX_VISITS
UA = b"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) Mobile/15E148 Safari/604.1"


def field(value):
    return len(value).to_bytes(2, "little") + value


def visit(code, ms, n, host):
    ip = f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}".encode()
    values = [code, str(ms).encode(), b"302", ip, UA, b"", host, b"en-GB"]
    values += [b""] * (FIELDS - len(values))
    return b"".join(field(v) for v in values)


def command(*args):
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


def main():
    count, host, codes = int(sys.argv[1]), sys.argv[2].encode(), [c.encode() for c in sys.argv[3:]]
    now = int(time.time() * 1000)
    out = sys.stdout.buffer
    for start in range(0, count, PER_ENTRY):
        batch = bytes([FORMAT]) + b"".join(
            visit(codes[n % len(codes)], now - count + n, n, host)
            for n in range(start, min(start + PER_ENTRY, count)))
        out.write(command(b"XADD", b"sl:events", b"*", b"v", batch))


if __name__ == "__main__":
    main()
