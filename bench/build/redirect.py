#!/usr/bin/env python3
"""bench/build's measuring half: wrk rounds against two nginx servers, interleaved.

Each cell is one bounded wrk run (one thread, 64 connections) on the hot codes (1,000, the module's
cache answers) or the uniform ones (every request a Redis lookup); around it the server's one
worker's utime+stime. Prints, per workload, the medians across rounds and the ratios of the second
server against the first: worker CPU per request (the accepted measure when the client is the
limit, worker below ~90% CPU) and req/s. Exit status 1 if a cell answered anything but redirects.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

CLK_TCK = os.sysconf("SC_CLK_TCK")
WORKLOADS = ["hot", "uniform"]


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--codes-dir", required=True)
    parser.add_argument("--wrk-script", required=True)
    parser.add_argument("--redis-port", type=int, required=True)
    parser.add_argument("--server", action="append", required=True,
                        help="NAME=PORT,MASTER_PID (the first is the reference)")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=64)
    return parser.parse_args()


def worker_of(master):
    with open(f"/proc/{master}/task/{master}/children") as children:
        workers = children.read().split()
    if len(workers) != 1:
        sys.exit(f"nginx {master}: {len(workers)} workers, expected one")
    return int(workers[0])


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def wrk(args, port, workload):
    out = subprocess.run(
        ["wrk", "-t1", f"-c{args.connections}", f"-d{args.seconds:g}s", "--timeout", "10s",
         "-s", args.wrk_script, f"http://127.0.0.1:{port}", "--",
         os.path.join(args.codes_dir, f"{workload}.txt")],
        capture_output=True, text=True, check=False)
    for line in out.stdout.splitlines():
        if line.startswith("BENCH "):
            return json.loads(line[len("BENCH "):]), out.stdout
    sys.exit(f"wrk gave no summary (exit {out.returncode}): {out.stderr.strip()}")


def main():
    args = parse_args()
    servers = []
    for spec in args.server:
        name, rest = spec.split("=", 1)
        port, master = rest.split(",")
        servers.append((name, int(port), worker_of(int(master))))
    cells = {}
    failed = False
    for round_ in range(args.rounds):
        for workload in WORKLOADS:
            for name, port, worker in servers:
                before = cpu_seconds(worker)
                summary, text = wrk(args, port, workload)
                used = cpu_seconds(worker) - before
                requests = summary["requests"]
                if summary.get("status_errors") or summary.get("socket_errors") or not requests:
                    print(f"{name} {workload}: errors\n{text}", file=sys.stderr)
                    failed = True
                seconds = summary["duration_us"] / 1e6
                cells.setdefault((workload, name), []).append({
                    "rps": requests / seconds,
                    "cpu_us": used / requests * 1e6 if requests else float("nan"),
                    "busy": used / seconds,
                })
                print(f"round {round_ + 1} {workload} {name}: {requests / seconds:,.0f} req/s, "
                      f"worker {used / requests * 1e6 if requests else 0:.2f} us/request, "
                      f"{used / seconds:.0%} busy", file=sys.stderr)
    reference = servers[0][0]
    print(f"\n| workload | server | req/s | worker CPU µs/request | worker busy | "
          f"CPU/request vs {reference} | req/s vs {reference} |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for workload in WORKLOADS:
        ref = {key: statistics.median(cell[key] for cell in cells[(workload, reference)])
               for key in ("rps", "cpu_us", "busy")}
        for name, _, _ in servers:
            med = {key: statistics.median(cell[key] for cell in cells[(workload, name)])
                   for key in ("rps", "cpu_us", "busy")}
            # Above 1 is better for both: the reference's CPU over this one's, req/s over theirs.
            print(f"| {workload} | {name} | {med['rps']:,.0f} | {med['cpu_us']:.2f} | "
                  f"{med['busy']:.0%} | {ref['cpu_us'] / med['cpu_us']:.2f}x | "
                  f"{med['rps'] / ref['rps']:.2f}x |")
    print(f"\nMedians of {args.rounds} round(s) of {args.seconds:g} s cells, wrk -t1 "
          f"-c{args.connections}; ratios above 1 mean faster than {reference} "
          "(its worker CPU per request over this one's).")
    sys.exit(1 if failed else 0)


main()
