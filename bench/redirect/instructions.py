#!/usr/bin/env python3
"""Instructions per request, counted by callgrind: the redirect benchmark's ratios without the noise.

Wall-clock req/s on a shared 2-core machine drifts by 2x between rounds; instruction counts do not
(the same binary, inputs and configuration give the same count whatever else the machine runs).
This runs nginx (one process, `master_process off`; a fresh one a cell) and Redis under
`valgrind --tool=callgrind`. A cell opens its keep-alive connections, warms the server up with the
cell's own codes, waits for nginx to be idle, zeroes the counters, sends a fixed number of
requests in a fixed order (counted.py; one in flight per connection, as wrk's), waits for idle
again, and dumps. Per request: nginx's count less its idle work (timers, measured once, 2 s)
for the cell's time, with glibc's allocator's calls priced at `return 302`'s rate of the same
run (heap.py). A cell then repeats within about 0.3% between runs on a busy machine, where a
timed wrk cell moved by ±3% (bench/results/redirect-instructions-exact-2026-11-29.md). Started
and stopped by bench/redirect/run (`--instructions`), which passes the rendered configuration
and data.

Counted: user-space instructions of the nginx process and of redis-server. Not counted: the
kernel (socket calls cost the same for every server, so they would pull every ratio towards 1)
and the client.
"""

import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
import time

from counted import Connections, settle
from heap import allocator
from measure import HEADERS, PHONE, RULES_TARGETS, RULES_WORKLOADS

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
                   help="connections of the uniform cells: enough lookups at once to pipeline")
    p.add_argument("--requests", type=int, default=1500,
                   help="requests counted per cell, the same ones in the same order every run")
    p.add_argument("--connections", type=int, default=1)
    p.add_argument("--budgets", help="a budgets file (bench/redirect/budgets): exit 1 when a cell "
                   "is over its budget")
    p.add_argument("--rules", action="store_true",
                   help="also issue 34's and 35's cells on D: a phone's clicks on plain, rule "
                        "and capped codes, a preview fetcher's on carded codes "
                        "(measure.RULES_WORKLOADS)")
    return p.parse_args()


def total_instructions(path):
    """The `summary:` (or `totals:`) line of a callgrind output file."""
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"{path}: no totals")


class Callgrind:
    """A process under callgrind, whose counters are zeroed and dumped on demand."""

    def __init__(self, name, out_dir, argv, env=None):
        self.out = os.path.join(out_dir, f"callgrind.{name}")
        self.proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={self.out}.%p",
             "--dump-instr=no", "--collect-atstart=yes",
             # Names in every dump, so one cell's file can be annotated on its own.
             "--compress-strings=no"] + argv,
            stdout=subprocess.DEVNULL, stderr=open(f"{self.out}.log", "w"),
            env=dict(os.environ, **(env or {})))

    def control(self, flag):
        subprocess.run(["callgrind_control", flag, str(self.proc.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)

    def zero(self):
        self.control("-z")

    def dump(self):
        """Dumps the counters since the last zero and returns the dump's path."""
        before = set(os.listdir(os.path.dirname(self.out)))
        self.control("-d")
        deadline = time.time() + 30
        while time.time() < deadline:
            new = [f for f in set(os.listdir(os.path.dirname(self.out))) - before
                   if f.startswith(os.path.basename(self.out) + ".")]
            if new:
                time.sleep(0.2)  # callgrind writes the file in one go; let it finish
                return os.path.join(os.path.dirname(self.out), new[0])
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


class Row:
    """One cell's counts, whole: nginx's, the allocator's part of them, Redis's."""

    def __init__(self, server, workload, requests, seconds, nginx_ir, heap_ir, heap_calls,
                 redis_ir):
        self.server, self.workload = server, workload
        self.requests, self.seconds = requests, seconds
        self.nginx_ir, self.heap_ir, self.heap_calls, self.redis_ir = (nginx_ir, heap_ir,
                                                                       heap_calls, redis_ir)

    def per_request(self, idle, price):
        """(nginx, Redis) instructions per request: nginx's without its idle work over the
        cell's time and with its allocator calls at `price` each (heap.py), Redis's without its
        idle work."""
        nginx = (self.nginx_ir - self.heap_ir + self.heap_calls * price
                 - idle["nginx"] * self.seconds)
        redis = max(self.redis_ir - idle["redis"] * self.seconds, 0)
        return nginx / self.requests, redis / self.requests


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
    paths = {w: [line.strip() for line in open(os.path.join(args.codes_dir, f"{f}.txt"))]
             for w, f in code_files.items()}
    out_dir = os.path.join(args.prefix, "callgrind")
    os.makedirs(out_dir, exist_ok=True)
    redis = Callgrind("redis", out_dir, [
        "redis-server", "--port", str(args.redis_port), "--bind", "127.0.0.1", "--dir",
        args.redis_dir, "--save", "", "--appendonly", "no", "--loglevel", "warning"])
    nginx = None
    rows = []

    def cell(server, workload, connections, warm, conf):
        plans[(server, workload)] = (connections, warm, conf)
        # A fresh nginx a cell: every cell's history is its own start-up and warm-up, the same
        # in every run, whatever cells ran before it.
        nonlocal nginx
        nginx = start_nginx(conf, f"nginx.{server}-{workload}")
        if warm and invalidation:
            # Until the module's invalidation subscription is up it neither reads nor fills its
            # cache: a bogus code then costs no probe (~50 instructions less), a hot one a lookup.
            wait_for(lambda: subscribers() == 1, "the module's invalidation subscription")
        port = ports[server]
        headers = RULES_WORKLOADS.get(workload, (None, None))[1] if args.rules else None
        lines = HEADERS[headers] if headers else ()
        # The codes this cell sends, in the order it always sends them.
        sent = paths[workload][:args.requests]
        clients = Connections(port, connections, lines)

        async def run():
            await clients.open()
            try:
                # Warm: every code of the cell once, so D's and E's caches hold them. Cold
                # (uniform, no module cache): a request per connection, so the module's Redis
                # connections are open before counting.
                warm_up = await clients.send(sent if warm else sent[:connections],
                                             len(sent) if warm else connections)
                settle(nginx.proc.pid)
                if not idle:
                    idle.update(idle_rates())
                nginx.zero()
                redis.zero()
                began = time.monotonic()
                statuses = await clients.send(sent, args.requests)
                settle(nginx.proc.pid)
                n_dump, r_dump = nginx.dump(), redis.dump()
                return warm_up, statuses, n_dump, r_dump, time.monotonic() - began
            finally:
                await clients.close()

        warm_up, statuses, n_dump, r_dump, seconds = asyncio.run(run())
        stop_nginx()
        requests = sum(statuses.values())
        # Every answer a redirect (2xx or 3xx; `return 302` answers any path so) but D's to bogus
        # codes (404), unless BENCH_NOT_FOUND_URL has D redirect them too (bench/redirect/run).
        redirected = server == "D" and os.environ.get("BENCH_NOT_FOUND_URL")
        bogus_404 = workload == "bogus" and server != "A" and not redirected
        refused = sum(n for status, n in statuses.items() if status >= 400)
        if requests != args.requests or refused != (requests if bogus_404 else 0):
            raise SystemExit(f"bench/redirect: {server} {workload}: wrong answers {statuses} "
                             f"(warm-up: {warm_up})")
        n_ir = total_instructions(n_dump)
        heap_ir, heap_calls = allocator(n_dump)
        rows.append(Row(server, workload, requests, seconds, n_ir, heap_ir, heap_calls,
                        total_instructions(r_dump)))
        log(f"{server} {workload}: {requests} requests in {seconds:.1f} s, {n_ir / requests:,.0f} "
            f"nginx instructions per request ({heap_ir / requests:,.0f} in glibc's allocator, "
            f"{heap_calls / requests:.2f} calls)")
        if server == "E":
            entries = int(subprocess.run(
                ["redis-cli", "-p", str(args.redis_port), "XLEN", "sl:events"],
                capture_output=True, text=True, check=True, timeout=60).stdout)
            subprocess.run(["redis-cli", "-p", str(args.redis_port), "DEL", "sl:events"],
                           check=True, stdout=subprocess.DEVNULL, timeout=60)
            visits = sum(warm_up.values()) + requests
            batches[workload] = visits / max(entries, 1)
            log(f"E {workload}: {visits} visits in {entries} stream entries")

    def idle_rates(seconds=2.0):
        """nginx's and Redis's instructions a second with no request: their timers (nginx's
        module refreshes its tables from Redis), which a cell shares among its requests by how
        long it took, not by how many there were."""
        nginx.zero()
        redis.zero()
        began = time.monotonic()
        time.sleep(seconds)
        settle(nginx.proc.pid)
        n_dump, r_dump = nginx.dump(), redis.dump()
        took = time.monotonic() - began
        return {"nginx": total_instructions(n_dump) / took,
                "redis": total_instructions(r_dump) / took}

    def start_nginx(conf, name):
        started = Callgrind(name, out_dir, [
            args.nginx, "-p", args.prefix, "-c", conf, "-g", "daemon off; master_process off;"])
        wait_for(lambda: all(port_open(p) for p in ports.values()), "nginx under callgrind")
        return started

    def stop_nginx():
        nonlocal nginx
        nginx.stop()
        nginx = None
        for port in ports.values():
            wait_for(lambda port=port: not port_open(port), "nginx to stop")
        # So that the next cell's wait sees its own nginx's subscription, not this one's.
        wait_for(lambda: subscribers() == 0, "Redis to drop nginx's subscription")

    def subscribers():
        """Redis's clients subscribed to a channel (the module's invalidation connections)."""
        clients = subprocess.run(["redis-cli", "-p", str(args.redis_port), "CLIENT", "LIST"],
                                 capture_output=True, text=True, check=True, timeout=60).stdout
        return sum(" sub=1 " in line for line in clients.splitlines())

    # `shortlink_cache_invalidation` is on unless the configuration turns it off.
    with open(os.path.join(args.prefix, "nginx.conf")) as conf:
        invalidation = not re.search(r"shortlink_cache_invalidation\s+off", conf.read())

    batches, idle, plans = {}, {}, {}
    try:
        wait_for(lambda: port_open(args.redis_port), "Redis under callgrind")
        with open(args.redis_load, "rb") as load:
            subprocess.run(["redis-cli", "-p", str(args.redis_port), "--pipe"], stdin=load,
                           check=True, stdout=subprocess.DEVNULL, timeout=600)
        # Cached: what a hot link and a bogus code cost, one request at a time.
        cached = os.path.join(args.prefix, "nginx.conf")
        # A hot twice: every ratio divides by it (the least of the two counts, see below).
        for server, workload in (("A", "hot"), ("A", "hot"), ("D", "hot"), ("E", "hot"),
                                 ("F", "hot"), ("A", "bogus"), ("D", "bogus")):
            cell(server, workload, args.connections, True, cached)
        if args.rules:
            for workload in ("phone-hot", "rules-hot", "capped-hot", "card-hot", "clickid-hot"):
                cell("D", workload, args.connections, True, cached)
        # Uncached: every request a Redis lookup (the uniform workload's cost per miss), with
        # enough requests at once for the module to pipeline them as under load.
        for server in ("B", "D", "E"):
            cell(server, "uniform", args.uncached_connections, False, args.uncached_conf)
        if args.rules:
            for workload in ("phone-uniform", "rules-uniform"):
                cell("D", workload, args.uncached_connections, False, args.uncached_conf)
        # What disturbs a cell only adds to it (a busy stretch that times out a module's Redis
        # reply and makes it reconnect, a lump of timer work): a cell over its budget is
        # measured again, twice at most, and the least of its counts stands.
        for _ in range(2 if args.budgets else 0):
            standing, price = least(rows, idle)
            values = {(r.server, r.workload): r.per_request(idle, price) for r in standing}
            for server, workload, value, budget in budget_checks(args.budgets, values):
                if value is not None and value > budget:
                    log(f"{server} {workload}: {value:.3f} × A hot, over its budget; again")
                    cell(server, workload, *plans[(server, workload)])
    finally:
        if nginx:
            nginx.stop()
        redis.stop()

    rows, price = least(rows, idle)
    cell = {(r.server, r.workload): r.per_request(idle, price) for r in rows}

    def ratio(ref, ours, redis_too=False):
        n_ref, r_ref = cell[ref]
        n_ours, r_ours = cell[ours]
        return (n_ref + (r_ref if redis_too else 0)) / (n_ours + (r_ours if redis_too else 0))

    L = [f"Instructions per request (callgrind; {args.requests:,} requests a cell, the same ones "
         f"every run, each cell on a fresh nginx. Hot and bogus: {args.connections} "
         "connection(s), after a warm-up that fills the caches. Uniform: "
         f"{args.uncached_connections} connections, module cache off, so every request is a "
         "Redis lookup). nginx: as counted, less its idle work (timers: "
         f"{idle['nginx']:,.0f} a second) for the cell's time, with glibc's allocator priced at "
         f"A hot's rate ({price:,.1f} a call; bench/redirect/heap.py says why). A hot is "
         "measured twice, and with a budgets file a cell over its budget again (twice at most): "
         "the least count stands, as a disturbance only adds:", "",
         "| server | workload | requests | seconds | nginx | as counted | allocator calls | "
         "Redis (beyond its idle work) |",
         "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        n, redis_ir = cell[(r.server, r.workload)]
        L.append(f"| {r.server} {SERVERS[r.server]} | {r.workload} | {r.requests:,} | "
                 f"{r.seconds:.1f} | {n:,.0f} | {r.nginx_ir / r.requests:,.0f} | "
                 f"{r.heap_calls / r.requests:.2f} | {redis_ir:,.0f} |")
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


def least(rows, idle):
    """The rows that stand, one a cell (the least count of its runs), and the allocator's price:
    the standing A hot's rate (Row.per_request)."""
    a_hot = min((r for r in rows if (r.server, r.workload) == ("A", "hot")),
                key=lambda r: (r.nginx_ir - idle["nginx"] * r.seconds) / r.requests)
    price = a_hot.heap_ir / a_hot.heap_calls
    best = {}
    for r in rows:
        key = (r.server, r.workload)
        if key not in best or r.per_request(idle, price)[0] < best[key].per_request(idle, price)[0]:
            best[key] = r
    return list(best.values()), price


def budget_checks(path, cell):
    """(server, workload, nginx instructions per request ÷ A hot's or None when not measured,
    budget) per budget of `path`."""
    reference = cell[("A", "hot")][0]
    return [(server, workload,
             cell[(server, workload)][0] / reference if (server, workload) in cell else None,
             budget)
            for server, workload, budget in read_budgets(path)]


def over_budget(path, cell):
    """Each budgeted cell's nginx instructions per request ÷ `return 302`'s on a hot code (A hot,
    measured in the same run: the ratio holds across nginx builds and machines as a count does
    not); exits 1 naming every cell over its budget, or one the run did not measure."""
    lines, over = ["| cell | ÷ A hot | budget |", "|---|---:|---:|"], []
    for server, workload, value, budget in budget_checks(path, cell):
        if value is None:
            over.append(f"{server} {workload}: not measured in this run")
            continue
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
