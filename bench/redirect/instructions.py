#!/usr/bin/env python3
"""Instructions per request, counted by callgrind: the redirect benchmark's ratios without the noise.

Wall-clock req/s on a shared 2-core machine drifts by 2x between rounds; instruction counts do not
(the same binary, inputs and configuration give the same count whatever else the machine runs).
This runs nginx (one process, `master_process off`) and Redis under `valgrind --tool=callgrind`,
warms each server up, zeroes the counters, runs wrk for a fixed time (so that nginx always has
requests waiting, as under real load), and divides the totals by the requests wrk completed. Started and stopped by bench/redirect/run
(`--instructions`), which passes the rendered configuration and data.

Counted: user-space instructions of the nginx process and of redis-server. Not counted: the
kernel (socket calls cost the same for every server, so they would pull every ratio towards 1)
and the client.
"""

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time

from measure import PHONE, RULES_TARGETS, RULES_WORKLOADS, write_header_files

SERVERS = {
    "A": "`return 302` (ceiling)",
    "B": "lua-resty-redis",
    "D": "shortlink module",
    "E": "D + visit tracking",
    "F": "D without per-domain counters",
}


def log(msg):
    print(f"bench/redirect: {msg}", file=sys.stderr, flush=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nginx", required=True, help="nginx binary")
    p.add_argument("--prefix", required=True, help="nginx prefix holding nginx.conf")
    p.add_argument("--redis-port", type=int, required=True)
    p.add_argument("--redis-dir", required=True)
    p.add_argument("--redis-load", required=True, help="RESP stream loading the codes")
    p.add_argument("--codes-dir", required=True)
    p.add_argument("--ports", required=True, help="A=port,B=port,D=port,E=port,F=port")
    p.add_argument("--uncached-conf", required=True,
                   help="the same configuration with the module's cache off (uniform cells)")
    p.add_argument("--uncached-connections", type=int, default=16,
                   help="wrk connections of the uniform cells: enough lookups at once to pipeline")
    p.add_argument("--seconds", type=float, default=10, help="wrk duration per cell")
    p.add_argument("--connections", type=int, default=1)
    p.add_argument("--wrk-script", required=True)
    p.add_argument("--budgets", help="a budgets file (bench/redirect/budgets): exit 1 when a cell "
                   "is over its budget")
    p.add_argument("--rules", action="store_true",
                   help="also issue 34's and 35's cells on D: a phone's clicks on plain, rule "
                        "and capped codes, a preview fetcher's on carded codes "
                        "(measure.RULES_WORKLOADS)")
    return p.parse_args()


async def warm_up(port, paths, connections):
    """Every path once, over `connections` keepalive connections; returns the status counts."""
    count = len(paths)
    statuses = {}
    per_conn = [count // connections + (i < count % connections) for i in range(connections)]

    async def one(n, offset):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for i in range(n):
            path = paths[(offset + i * connections) % len(paths)]
            writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: bench\r\n"
                         f"Referer: https://example.org/x\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            statuses[status] = statuses.get(status, 0) + 1
            length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
            if length:
                await reader.readexactly(int(length.group(1)))
        writer.close()

    await asyncio.gather(*(one(n, i) for i, n in enumerate(per_conn)))
    return statuses


def wrk(args, port, code_file, connections, headers=None):
    """Runs wrk against `port` for `args.seconds` (sending the header file `headers`, if given);
    returns its summary."""
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{args.seconds:g}s", "--timeout", "10s",
         "-s", args.wrk_script, f"http://127.0.0.1:{port}", "--", code_file]
        + ([headers] if headers else []),
        capture_output=True, text=True, timeout=args.seconds + 120)
    for line in out.stdout.splitlines():
        if line.startswith("BENCH "):
            return json.loads(line[len("BENCH "):])
    raise RuntimeError(f"wrk gave no summary (exit {out.returncode}): {out.stderr.strip()}")


def total_instructions(path):
    """The `summary:` (or `totals:`) line of a callgrind output file."""
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"{path}: no totals")


class Callgrind:
    """A process under callgrind, whose counters are zeroed and dumped on demand."""

    def __init__(self, name, out_dir, argv):
        self.out = os.path.join(out_dir, f"callgrind.{name}")
        self.proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={self.out}.%p",
             "--dump-instr=no", "--collect-atstart=yes",
             # Names in every dump, so one cell's file can be annotated on its own.
             "--compress-strings=no"] + argv,
            stdout=subprocess.DEVNULL, stderr=open(f"{self.out}.log", "w"))

    def control(self, flag):
        subprocess.run(["callgrind_control", flag, str(self.proc.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)

    def zero(self):
        self.control("-z")

    def dump(self):
        """Dumps the counters since the last zero and returns their total."""
        before = set(os.listdir(os.path.dirname(self.out)))
        self.control("-d")
        deadline = time.time() + 30
        while time.time() < deadline:
            new = [f for f in set(os.listdir(os.path.dirname(self.out))) - before
                   if f.startswith(os.path.basename(self.out) + ".")]
            if new:
                time.sleep(0.2)  # callgrind writes the file in one go; let it finish
                return total_instructions(os.path.join(os.path.dirname(self.out), new[0]))
            time.sleep(0.05)
        raise RuntimeError(f"callgrind wrote no dump for {self.out}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait_for(predicate, what, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise SystemExit(f"bench/redirect: {what} did not come up")


def port_open(port):
    import socket
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def main():
    args = parse_args()
    ports = {k: int(v) for k, v in (kv.split("=") for kv in args.ports.split(","))}
    code_files = {w: w for w in ("hot", "bogus", "uniform")}
    if args.rules:
        code_files.update({w: codes for w, (codes, _) in RULES_WORKLOADS.items()})
        header_files = write_header_files(args.codes_dir)
    paths = {w: [line.strip() for line in open(os.path.join(args.codes_dir, f"{f}.txt"))]
             for w, f in code_files.items()}
    out_dir = os.path.join(args.prefix, "callgrind")
    os.makedirs(out_dir, exist_ok=True)
    redis = Callgrind("redis", out_dir, [
        "redis-server", "--port", str(args.redis_port), "--bind", "127.0.0.1", "--dir",
        args.redis_dir, "--save", "", "--appendonly", "no", "--loglevel", "warning"])
    nginx = None
    rows = []

    def cell(server, workload, connections, warm):
        port = ports[server]
        if warm:  # every code once, so D's and E's caches hold them
            asyncio.run(warm_up(port, paths[workload], connections))
        nginx.zero()
        redis.zero()
        headers = RULES_WORKLOADS.get(workload, (None, None))[1] if args.rules else None
        summary = wrk(args, port, os.path.join(args.codes_dir, f"{code_files[workload]}.txt"),
                      connections, header_files[headers] if headers else None)
        n_ir, r_ir = nginx.dump(), redis.dump()
        requests = summary["requests"]
        errors = sum(summary[k] for k in ("connect_errors", "read_errors", "write_errors",
                                          "timeouts"))
        # wrk counts every non-2xx/3xx answer as a status error: all of them for D's bogus
        # codes (404), none anywhere else.
        # With BENCH_NOT_FOUND_URL D redirects them instead (bench/redirect/run).
        redirected = server == "D" and os.environ.get("BENCH_NOT_FOUND_URL")
        bogus_404 = workload == "bogus" and server != "A" and not redirected
        expected_status_errors = requests if bogus_404 else 0
        if errors or summary["status_errors"] != expected_status_errors or requests == 0:
            raise SystemExit(f"bench/redirect: {server} {workload}: wrong answers {summary}")
        rows.append((server, workload, n_ir / requests, r_ir / requests, requests))
        log(f"{server} {workload}: {requests} requests, {n_ir / requests:,.0f} nginx + "
            f"{r_ir / requests:,.0f} Redis instructions per request")
        if server == "E":
            entries = int(subprocess.run(
                ["redis-cli", "-p", str(args.redis_port), "XLEN", "sl:events"],
                capture_output=True, text=True, check=True, timeout=60).stdout)
            subprocess.run(["redis-cli", "-p", str(args.redis_port), "DEL", "sl:events"],
                           check=True, stdout=subprocess.DEVNULL, timeout=60)
            visits = (len(paths[workload]) if warm else 0) + requests
            batches[workload] = visits / max(entries, 1)
            log(f"E {workload}: {visits} visits in {entries} stream entries")

    def start_nginx(conf):
        started = Callgrind("nginx", out_dir, [
            args.nginx, "-p", args.prefix, "-c", conf, "-g", "daemon off; master_process off;"])
        wait_for(lambda: all(port_open(p) for p in ports.values()), "nginx under callgrind")
        return started

    batches = {}
    try:
        wait_for(lambda: port_open(args.redis_port), "Redis under callgrind")
        with open(args.redis_load, "rb") as load:
            subprocess.run(["redis-cli", "-p", str(args.redis_port), "--pipe"], stdin=load,
                           check=True, stdout=subprocess.DEVNULL, timeout=600)
        # Cached: what a hot link and a bogus code cost, one request at a time.
        nginx = start_nginx(os.path.join(args.prefix, "nginx.conf"))
        for server, workload in (("A", "hot"), ("D", "hot"), ("E", "hot"), ("F", "hot"),
                                 ("A", "bogus"), ("D", "bogus")):
            cell(server, workload, args.connections, warm=True)
        if args.rules:
            for workload in ("phone-hot", "rules-hot", "capped-hot", "card-hot", "clickid-hot"):
                cell("D", workload, args.connections, warm=True)
        nginx.stop()
        for port in ports.values():
            wait_for(lambda port=port: not port_open(port), "nginx to stop")
        # Uncached: every request a Redis lookup (the uniform workload's cost per miss), with
        # enough requests at once for the module to pipeline them as under load.
        nginx = start_nginx(args.uncached_conf)
        for server in ("B", "D", "E"):
            cell(server, "uniform", args.uncached_connections, warm=False)
        if args.rules:
            for workload in ("phone-uniform", "rules-uniform"):
                cell("D", workload, args.uncached_connections, warm=False)
    finally:
        if nginx:
            nginx.stop()
        redis.stop()

    # Redis works even when nobody asks it anything (its timers): A's cells never reach Redis, so
    # A hot's Redis total over the cell is that idle work, taken off every cell before dividing.
    idle = next(r * req for s, w, _, r, req in rows if (s, w) == ("A", "hot"))
    rows = [(s, w, n, max(r * req - idle, 0) / req, req) for s, w, n, r, req in rows]
    cell = {(s, w): (n, r) for s, w, n, r, _ in rows}

    def ratio(ref, ours, redis_too=False):
        n_ref, r_ref = cell[ref]
        n_ours, r_ours = cell[ours]
        return (n_ref + (r_ref if redis_too else 0)) / (n_ours + (r_ours if redis_too else 0))

    L = [f"Instructions per request (callgrind; wrk for {args.seconds:g} s a cell. Hot and bogus: "
         f"{args.connections} connection(s), after a warm-up that fills the caches. Uniform: "
         f"{args.uncached_connections} connections, module cache off, so every request is a "
         "Redis lookup):", "",
         "| server | workload | requests | nginx | Redis (beyond its idle work) |",
         "|---|---|---:|---:|---:|"]
    for s, w, n, r, requests in rows:
        L.append(f"| {s} {SERVERS[s]} | {w} | {requests:,} | {n:,.0f} | {r:,.0f} |")
    L += ["", "Ratios (reference ÷ ours, so ≥ 1 means ours needs no more instructions):", "",
          "| ratio | value | target |", "|---|---:|---|",
          f"| hot D/A (nginx) | {ratio(('A', 'hot'), ('D', 'hot')):.3f} | ≥ 0.95 |",
          f"| bogus D/A (nginx) | {ratio(('A', 'bogus'), ('D', 'bogus')):.3f} | ≥ 0.95 |",
          f"| hot D/F, per-domain counters on/off (nginx) | "
          f"{ratio(('F', 'hot'), ('D', 'hot')):.3f} | ≥ 0.98 |",
          f"| hot E/D (nginx) | {ratio(('D', 'hot'), ('E', 'hot')):.3f} | |",
          f"| hot E/D (nginx + Redis) | {ratio(('D', 'hot'), ('E', 'hot'), True):.3f} | ≥ 0.95 |",
          f"| uniform D/B (nginx) | {ratio(('B', 'uniform'), ('D', 'uniform')):.2f} | |",
          f"| uniform D/B (nginx + Redis) | "
          f"{ratio(('B', 'uniform'), ('D', 'uniform'), True):.2f} | ≥ 2 |",
          f"| uniform E/D (nginx + Redis) | "
          f"{ratio(('D', 'uniform'), ('E', 'uniform'), True):.3f} | ≥ 0.95 |",
          "", f"E wrote {batches['hot']:.1f} (hot) and {batches['uniform']:.1f} (uniform) visits "
          "per stream entry on average (a batch leaves `shortlink_events_flush` after its "
          "first visit, or at 512 visits or 64 KiB).", ""]
    if args.rules:
        L += ["Click-time rules (issue 34), D, every request a phone's ("
              + "; ".join(PHONE) + "): phone = plain codes; rules = five rules (device, "
              "language, country through the geo database, query, then a sticky split); capped "
              "= `max_visits` (one INCR a click); card = WhatsApp's preview fetcher on codes with "
              "a card (issue 35). Uniform: module cache off, so every request "
              "decodes its record. nginx instructions per request, workload ÷ reference:", "",
              "| workload | reference | nginx | nginx + Redis | target (worker CPU) |",
              "|---|---|---:|---:|---|"]
        for workload, reference, target in RULES_TARGETS:
            L.append(f"| {workload} | {reference} | {1 / ratio(('D', reference), ('D', workload)):.3f}"
                     f" | {1 / ratio(('D', reference), ('D', workload), True):.3f} | ≤ {target} |")
        L.append("")
    print("\n".join(L))
    if args.budgets:
        over_budget(args.budgets, cell)


def read_budgets(path):
    """(server, workload, budget) per line of `path`: `D hot 1.160 why…`; `#` starts a comment."""
    budgets = []
    for number, line in enumerate(open(path), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split(None, 3)
        if len(fields) < 4:
            raise SystemExit(f"{path}:{number}: `<server> <workload> <budget> <why>`, not {line!r}")
        budgets.append((fields[0], fields[1], float(fields[2])))
    return budgets


def over_budget(path, cell):
    """Each budgeted cell's nginx instructions per request ÷ `return 302`'s on a hot code (A hot,
    measured in the same run: the ratio holds across nginx builds and machines as a count does
    not); exits 1 naming every cell over its budget, or one the run did not measure."""
    reference = cell[("A", "hot")][0]
    lines, over = ["| cell | ÷ A hot | budget |", "|---|---:|---:|"], []
    for server, workload, budget in read_budgets(path):
        if (server, workload) not in cell:
            over.append(f"{server} {workload}: not measured in this run")
            continue
        value = cell[(server, workload)][0] / reference
        lines.append(f"| {server} {workload} | {value:.3f} | {budget:.3f} |")
        if value > budget:
            over.append(f"{server} {workload}: {value:.3f} × `return 302`, budget {budget:.3f}")
    print("Budgets (" + path + "), nginx instructions per request ÷ A hot's:\n")
    print("\n".join(lines) + "\n")
    if over:
        raise SystemExit("bench/redirect: over budget (a change that needs more raises the "
                         "budget in bench/redirect/budgets, with why, in the same commit):\n  "
                         + "\n  ".join(over))


if __name__ == "__main__":
    main()
