#!/usr/bin/env python3
"""Loads the benchmark's RESP stream (gen-codes' `SET`s) into a Redis Cluster: each key to the
primary serving its slot, one `redis-cli --pipe` per primary, and the single-Redis projection
marker `sl:meta:projection` replaced by the per-slot markers `sl:meta:projection:{<tag>}` of every
slot (docs/REDIS-CLUSTER.md; the slot function and tags as in wire/src/cluster.rs).

Usage: cluster-load.py <load.resp> <any node port> <scratch dir>
"""

import os
import socket
import subprocess
import sys

SLOTS = 16384
MARKER = b"sl:meta:projection"
TAG_ALPHABET = b"0123456789abcdefghijklmnopqrstuvwxyz"


def crc16_table():
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


TABLE = crc16_table()


def crc16(data):
    crc = 0
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ TABLE[((crc >> 8) ^ b) & 0xFF]
    return crc


def key_slot(key):
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    return crc16(key) % SLOTS


def slot_tags():
    """For each slot the first tag of the enumeration (lengths 1, 2, ... over [0-9a-z]) landing there."""
    tags = [None] * SLOTS
    missing = SLOTS
    digits = [0]
    while missing:
        tag = bytes(TAG_ALPHABET[d] for d in digits)
        slot = crc16(tag) % SLOTS
        if tags[slot] is None:
            tags[slot] = tag
            missing -= 1
        for i in range(len(digits) - 1, -1, -1):
            digits[i] += 1
            if digits[i] < len(TAG_ALPHABET):
                break
            digits[i] = 0
        else:
            digits.insert(0, 0)
    return tags


def command(port, *args):
    """One command on a fresh connection; the reply parsed (RESP2)."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(encode(args))
        f = s.makefile("rb")
        return read(f)


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def read(f):
    line = f.readline()[:-2]
    kind, rest = line[:1], line[1:]
    if kind in (b"+", b"-"):
        return rest
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [read(f) for _ in range(n)]
    raise ValueError(f"not RESP: {line!r}")


def commands(stream):
    """The commands of a RESP stream, as lists of bytes."""
    i = 0
    while i < len(stream):
        assert stream[i:i + 1] == b"*", "a command array"
        j = stream.index(b"\r\n", i)
        n, i = int(stream[i + 1:j]), j + 2
        args = []
        for _ in range(n):
            j = stream.index(b"\r\n", i)
            size = int(stream[i + 1:j])
            args.append(stream[j + 2:j + 2 + size])
            i = j + 2 + size + 2
        yield args


def main():
    load, port, scratch = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    owner = [None] * SLOTS
    for start, end, primary, *_ in command(port, "CLUSTER", "SLOTS"):
        for slot in range(start, end + 1):
            owner[slot] = int(primary[1])
    out = {p: [] for p in set(owner)}
    marker_value = None
    with open(load, "rb") as f:
        stream = f.read()
    for args in commands(stream):
        if args[1] == MARKER:
            marker_value = args[2]
            continue
        out[owner[key_slot(args[1])]].append(encode(args))
    assert marker_value is not None, "the stream sets no projection marker"
    for slot, tag in enumerate(slot_tags()):
        out[owner[slot]].append(encode([b"SET", MARKER + b":{" + tag + b"}", marker_value]))
    for node, cmds in sorted(out.items()):
        path = os.path.join(scratch, f"cluster-{node}.resp")
        with open(path, "wb") as f:
            f.write(b"".join(cmds))
        with open(path, "rb") as f:
            done = subprocess.run(["redis-cli", "-p", str(node), "--pipe"], stdin=f,
                                  capture_output=True, text=True, check=True)
        if f"errors: 0, replies: {len(cmds)}" not in done.stdout:
            sys.exit(f"cluster-load: loading 127.0.0.1:{node} failed: {done.stdout}{done.stderr}")
        print(f"cluster-load: 127.0.0.1:{node}: {len(cmds)} keys", file=sys.stderr)


if __name__ == "__main__":
    main()
