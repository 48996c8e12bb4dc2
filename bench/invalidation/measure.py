"""Cells of bench/invalidation/run: hot redirects ON vs OFF, and invalidation latency on ON."""
import argparse
import datetime
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def workers(master):
    with open(f"/proc/{master}/task/{master}/children") as f:
        return [int(p) for p in f.read().split()]


def wrk(args, port, seconds, connections):
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", args.wrk_script,
         f"http://127.0.0.1:{port}", "--", args.hot],
        capture_output=True, text=True, check=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("BENCH "))
    return json.loads(line[6:])


def hot_cell(args, port, master):
    pids = workers(master)
    before = [cpu_seconds(p) for p in pids], cpu_seconds(args.redis_pid)
    r = wrk(args, port, args.duration, args.connections)
    after = [cpu_seconds(p) for p in pids], cpu_seconds(args.redis_pid)
    errors = sum(r[k] for k in ("connect_errors", "read_errors", "write_errors", "timeouts", "status_errors"))
    n = max(r["requests"], 1)
    return {
        "rps": r["requests"] / (r["duration_us"] / 1e6),
        "worker_us": (sum(after[0]) - sum(before[0])) * 1e6 / n,
        "redis_us": (after[1] - before[1]) * 1e6 / n,
        "errors": errors,
    }


class Redis:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def set(self, key, value):
        parts = [b"SET", key.encode(), value.encode()]
        self.sock.sendall(b"*3\r\n" + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts))
        while b"\r\n" not in self.buf:
            self.buf += self.sock.recv(4096)
        line, self.buf = self.buf.split(b"\r\n", 1)
        assert line == b"+OK", line


def get(conn, path):
    conn.request("GET", path, headers={"Host": "127.0.0.1"})
    r = conn.getresponse()
    r.read()
    return r.status, r.getheader("Location", ""), r.getheader("X-Worker", "")


def probes(port, path, want):
    """One keep-alive connection per worker (reuseport spreads new connections)."""
    found = {}
    for _ in range(200):
        conn = http.client.HTTPConnection("127.0.0.1", port)
        _, _, worker = get(conn, path)
        if worker not in found:
            found[worker] = conn
        else:
            conn.close()
        if len(found) == want:
            return list(found.values())
    sys.exit(f"could not reach {want} workers")


def latency(args, port, master):
    hot = [l.strip() for l in open(args.hot) if l.strip()]
    load = subprocess.Popen(
        ["wrk", "-t1", "-c16", f"-d{3600}s", "-s", args.wrk_script, f"http://127.0.0.1:{port}",
         "--", args.hot], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        conns = probes(port, hot[0], len(workers(master)))
        redis = Redis(args.redis_port)
        samples, wrong = [], 0
        for i in range(args.changes):
            path = hot[i % len(hot)]
            for c in conns:  # cached in every worker before the change
                get(c, path)
            target = f"https://example.com/changed-{i}"
            redis.set("sl:c:" + path[1:], f"1|L|302|0|0|{target}")
            t0 = time.monotonic()
            pending = list(conns)
            while pending:
                if time.monotonic() - t0 > 5:
                    wrong += len(pending)
                    break
                still = []
                for c in pending:
                    status, location, _ = get(c, path)
                    if not (status == 302 and location == target):
                        still.append(c)
                pending = still
            samples.append((time.monotonic() - t0) * 1000)
        return samples, wrong
    finally:
        load.terminate()
        load.wait()


def main():
    p = argparse.ArgumentParser()
    for a in ("--redis-port", "--redis-pid", "--duration", "--rounds", "--changes", "--connections", "--codes"):
        p.add_argument(a, type=int, required=True)
    for a in ("--on", "--off", "--hot", "--wrk-script"):
        p.add_argument(a, required=True)
    p.add_argument("--out")
    args = p.parse_args()
    servers = {}
    for name in ("on", "off"):
        port, master = getattr(args, name).split(":")
        servers[name] = (int(port), int(master))
    time.sleep(1)  # workers subscribed
    for name, (port, master) in servers.items():
        wrk(args, port, 1, args.connections)  # warm both caches
    cells = {"on": [], "off": []}
    for _ in range(args.rounds):
        for name in ("on", "off"):
            cells[name].append(hot_cell(args, *servers[name]))
    samples, wrong = latency(args, *servers["on"])

    def med(name, key):
        return statistics.median(c[key] for c in cells[name])

    q = statistics.quantiles(samples, n=100, method="inclusive")
    ratio = med("on", "rps") / med("off", "rps")
    lines = [
        f"# Invalidation benchmark {datetime.date.today()}",
        "",
        f"Debian nginx 1.22, 2 workers, module cache 1 h (ON, tracking) vs 10 s TTL-only (OFF); "
        f"{args.codes} codes in Redis, 1,000 hot; wrk -t1 -c{args.connections}, {args.rounds} x "
        f"{args.duration} s interleaved; medians. `bench/invalidation/run`.",
        "",
        "| cell | req/s | worker CPU µs/req | Redis CPU µs/req | errors |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in ("on", "off"):
        lines.append(
            f"| hot, invalidation {name.upper()} | {med(name, 'rps'):,.0f} | {med(name, 'worker_us'):.1f} "
            f"| {med(name, 'redis_us'):.2f} | {sum(c['errors'] for c in cells[name])} |")
    lines += [
        "",
        f"- hot ON/OFF: **{ratio:.3f}x** (target >= 0.97)",
        f"- invalidation latency over {len(samples)} changes under hot load (Redis +OK of the SET "
        f"to the last of {len(workers(servers['on'][1]))} workers answering the new target): "
        f"p50 **{statistics.median(samples):.2f} ms**, p99 **{q[98]:.2f} ms**, max {max(samples):.2f} ms "
        f"(target p99 <= 100 ms); changes not seen within 5 s: {wrong}",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    ok = ratio >= 0.97 and q[98] <= 100 and wrong == 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
