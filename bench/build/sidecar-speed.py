#!/usr/bin/env python3
"""Two or more sidecar binaries side by side on SQLite: create p50/p99 and a batch's links a second.

Usage: bench/build/sidecar-speed.py NAME=BINARY NAME=BINARY... [--creates N] [--lines N]

For comparing builds of the same commit (profiles, codegen options) without building the Rust
benches' drivers, a dev build of their own (`bench/create-latency`, `bench/batch-throughput` are
the reference; their shapes are kept: the same lines, rounds of 100 alternating between binaries
after 200 warm-up creates). Each binary gets its own Redis and SQLite file, all started before
the first request. The client is Python's `http.client` (keep-alive), the same for every binary,
so the ratios hold; its own overhead is in the absolute times. Prints a markdown table; the
first binary is the reference of the ratios.
"""
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

API_KEY = "slk_bench000000000000000000000000000000000000000000000000000000000"
SECRET_HEX = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
LISTENING = "shortlink-sidecar listening on "


def target(i):
    return f"https://shop.example/spring-sale?utm_source=sms&utm_campaign=c42&r={i}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_secs(pid):
    stat = open(f"/proc/{pid}/stat").read()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Stack:
    def __init__(self, name, binary, root):
        self.name, self.dir = name, os.path.join(root, name)
        os.makedirs(self.dir)
        port = free_port()
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL)
        while subprocess.run(["redis-cli", "-p", str(port), "ping"],
                             capture_output=True).stdout.strip() != b"PONG":
            time.sleep(0.05)
        self.sidecar = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0",
             "--database-url", f"sqlite://{self.dir}/db.sqlite",
             "--redis-url", f"redis://127.0.0.1:{port}", "--code-secret", SECRET_HEX,
             "--bootstrap-api-key", API_KEY, "--redis-timeout", "5s", "--db-timeout", "10s",
             "--public-base-url", "https://s1.example",
             "--api-rate-limit", "1000000", "--api-rate-burst", "1000000"],
            stdout=subprocess.PIPE, stderr=open(os.path.join(self.dir, "log"), "w"),
            env={**os.environ, "RUST_LOG": "warn"}, text=True)
        for line in self.sidecar.stdout:
            if line.startswith(LISTENING):
                host, port = line[len(LISTENING):].strip().rsplit(":", 1)
                break
        else:
            sys.exit(f"{name}: the sidecar exited (log in {self.dir})")
        self.connection = http.client.HTTPConnection(host, int(port))
        self.host, self.port = host, int(port)
        self.latencies, self.cpu = [], 0.0

    def create(self, i):
        body = json.dumps({"url": target(i)})
        started = time.perf_counter()
        self.connection.request("POST", "/api/v1/links", body, {
            "Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"})
        response = self.connection.getresponse()
        response.read()
        elapsed = time.perf_counter() - started
        assert response.status == 201, (self.name, response.status)
        return elapsed

    def batch(self, lines, offset):
        body = "".join(json.dumps({"url": target(offset + i), "campaign": "c42",
                                   "ref": f"r{i}"}) + "\n" for i in range(lines)).encode()
        connection = http.client.HTTPConnection(self.host, self.port, timeout=600)
        cpu = cpu_secs(self.sidecar.pid)
        started = time.perf_counter()
        connection.request("POST", "/api/v1/links/batch", body, {
            "Authorization": f"Bearer {API_KEY}", "Content-Type": "application/x-ndjson"})
        response = connection.getresponse()
        answer = response.read()
        seconds = time.perf_counter() - started
        created = answer.count(b'"status":201')
        assert response.status == 200 and created == lines, (self.name, response.status, created)
        return seconds, cpu_secs(self.sidecar.pid) - cpu

    def stop(self):
        for process in (self.sidecar, self.redis):
            process.terminate()
            process.wait()


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main():
    args = sys.argv[1:]
    options = {"--creates": 2000, "--lines": 200_000}
    for option in options:
        if option in args:
            at = args.index(option)
            options[option] = int(args[at + 1])
            del args[at : at + 2]
    if len(args) < 2 or not all("=" in arg for arg in args):
        sys.exit(__doc__)
    root = tempfile.mkdtemp(prefix="sidecar-speed-")
    stacks = [Stack(*arg.split("=", 1), root) for arg in args]
    try:
        for stack in stacks:
            for i in range(200):
                stack.create(10_000_000 + i)
        for round_start in range(0, options["--creates"], 100):
            for stack in stacks:
                cpu = cpu_secs(stack.sidecar.pid)
                for i in range(round_start, round_start + 100):
                    stack.latencies.append(stack.create(i))
                stack.cpu += cpu_secs(stack.sidecar.pid) - cpu
        batches = [stack.batch(options["--lines"], 20_000_000) for stack in stacks]
    finally:
        for stack in stacks:
            stack.stop()
        shutil.rmtree(root)
    reference = stacks[0]
    base_p50, base_p99 = percentile(reference.latencies, 0.5), percentile(reference.latencies, 0.99)
    base_rate = options["--lines"] / batches[0][0]
    print(f"{options['--creates']} creates each, a batch of {options['--lines']} lines; SQLite\n")
    print("| build | create p50 (ms) | p99 (ms) | CPU/create (ms) | batch links/s | CPU/link (µs) "
          "| p50 vs first | p99 vs first | links/s vs first |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for stack, (seconds, cpu) in zip(stacks, batches):
        p50, p99 = percentile(stack.latencies, 0.5), percentile(stack.latencies, 0.99)
        rate = options["--lines"] / seconds
        print(f"| {stack.name} | {p50 * 1e3:.3f} | {p99 * 1e3:.3f} "
              f"| {stack.cpu * 1e3 / len(stack.latencies):.3f} | {rate:,.0f} "
              f"| {cpu * 1e6 / options['--lines']:.1f} | {base_p50 / p50:.2f} "
              f"| {base_p99 / p99:.2f} | {rate / base_rate:.2f} |")


if __name__ == "__main__":
    main()
