#!/usr/bin/env python3
"""The redirect benchmark's measuring half; bench/redirect/run starts Redis and nginx, then this.

1. Correctness first: the same codes redirect to the same Location on B, C and D (twice, so cached
   answers are checked too), a valid code that is not loaded and bogus codes answer 404, A answers its
   fixed 302; then a spot check of 200 uniform codes (their targets are known: line i is sequence i).
2. Cells: rounds x workloads x servers, servers interleaved A B C D E within each workload. Each cell is
   one bounded wrk run; around it the nginx worker's and Redis's utime+stime and the worker's VmRSS
   (G's and O's own workers for G and O: O is D's configuration on a second nginx loading a baseline
   build of the module, for a same-run D/O).
3. Medians across rounds, ratios against the targets, memory, machine: a markdown report on stdout
   and, if --out, in that file.

Exit status: 0 when every cell ran and answered correctly (performance targets never fail the run),
1 otherwise.
"""

import argparse
import datetime
import hashlib
import http.client
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

WORKLOADS = ["hot", "uniform", "bogus"]
# With --rules (issue 34), on D only: a phone's click (agent, language, a US address through
# X-Forwarded-For) on plain codes, on codes with five click-time rules, and on capped codes
# (max_visits: one INCR a click); and (issue 35) a messaging app's link preview fetcher on codes
# with a card. Each names its code file and the headers it sends (HEADERS).
RULES_WORKLOADS = {
    "phone-hot": ("hot", "phone"),
    "rules-hot": ("rules-hot", "phone"),
    "capped-hot": ("capped-hot", "phone"),
    "card-hot": ("card-hot", "fetcher"),
    "clickid-hot": ("clickid-hot", "phone"),
    "phone-uniform": ("uniform", "phone"),
    "rules-uniform": ("rules-uniform", "phone"),
}
PHONE = [
    "User-Agent: Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/124.0.0.0 Safari/537.36",
    "Accept-Language: en-US,en;q=0.9",
    "X-Forwarded-For: 8.8.8.8",
]
# WhatsApp's fetcher, as it sends itself (wire::agent's table).
FETCHER = ["User-Agent: WhatsApp/2.23.20.0 A", "X-Forwarded-For: 8.8.8.8"]
HEADERS = {"phone": PHONE, "fetcher": FETCHER}
# (workload, reference, maximum worker CPU per request of workload / reference) — issues 34, 35.
RULES_TARGETS = [("rules-hot", "phone-hot", 1.25), ("rules-uniform", "phone-uniform", 1.25),
                 ("capped-hot", "phone-hot", 1.5), ("card-hot", "phone-hot", 3.0),
                 ("clickid-hot", "phone-hot", 1.1)]
# (workload, numerator, denominator, minimum) — the targets of issue 6.
TARGETS = [("hot", "D", "A", 0.95), ("uniform", "D", "B", 2.0), ("bogus", "D", "A", 0.95)]
CLK_TCK = os.sysconf("SC_CLK_TCK")
DESCRIPTION = {
    "A": "`return 302` (ceiling)",
    "B": "Lua + lua-resty-redis, keepalive pool",
    "C": "B + ngx.shared.DICT cache",
    "D": "shortlink module",
    "E": "D + visit tracking (batched XADD)",
    "F": "D without per-domain counters",
    "G": "D on a 3-primary Redis Cluster (own nginx, one worker)",
    "O": "D with the baseline module (own nginx, one worker)",
    "R": "G reading each primary's replica (`read_replicas=127.0.0.0/8`; own nginx, one worker)",
}
# (workload, minimum G/R worker CPU per request): reading replicas must cost a lookup no more than
# reading primaries (issue 39).
REPLICA_TARGETS = [("uniform", 0.9)]
# (workload, minimum D/F): per-domain counters must cost a hot redirect almost nothing (issue 20).
DOMAIN_COUNTER_TARGETS = [("hot", 0.98)]
# (workload, minimum E/D): tracking must cost a redirect almost nothing (issue 4).
TRACKING_TARGETS = [("hot", 0.95), ("uniform", 0.95)]


def log(msg):
    print(f"bench/redirect: {msg}", file=sys.stderr, flush=True)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--nginx-pid", type=int, required=True)
    p.add_argument("--redis-pid", type=int, required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--codes-dir", required=True)
    p.add_argument("--servers", required=True)
    p.add_argument("--ports", required=True)
    p.add_argument("--codes", type=int, required=True)
    p.add_argument("--duration", type=float, required=True)
    p.add_argument("--rounds", type=int, required=True)
    p.add_argument("--warmup", type=float, default=0)
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--cache-entries", type=int, required=True)
    p.add_argument("--lua-cache", required=True)
    p.add_argument("--module-cache", required=True)
    p.add_argument("--wrk-script", required=True)
    p.add_argument("--started", type=float, default=time.time())
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--rules", action="store_true",
                   help="also the click-time rules cells (issue 34), on D only")
    p.add_argument("--no-pin", dest="pin", action="store_false",
                   help="leave the nginx worker and wrk on whatever CPUs the kernel picks")
    p.add_argument("--out")
    p.add_argument("--cluster-nginx-pid", type=int, help="server G's nginx master (--cluster)")
    p.add_argument("--cluster-prefix", help="server G's nginx prefix")
    p.add_argument("--cluster-redis-pids", default="", help="the cluster's redis-server PIDs")
    p.add_argument("--cluster-ports", default="", help="the cluster's node ports (MGET counts)")
    p.add_argument("--replicas-nginx-pid", type=int, help="server R's nginx master (--replicas)")
    p.add_argument("--replicas-prefix", help="server R's nginx prefix")
    p.add_argument("--baseline-nginx-pid", type=int, help="server O's nginx master")
    p.add_argument("--baseline-prefix", help="server O's nginx prefix")
    p.add_argument("--baseline-module", help="server O's module .so (BENCH_BASELINE_MODULE)")
    p.add_argument("--module-so", help="D's module .so (named in the report next to O's)")
    a = p.parse_args()
    a.cluster_redis_pids = [int(x) for x in a.cluster_redis_pids.split(",") if x]
    a.servers = a.servers.split(",")
    a.ports = {k: int(v) for k, v in (kv.split("=") for kv in a.ports.split(","))}
    return a


# --- processes --------------------------------------------------------------------------------------


def cpu_ticks(pid):
    """utime + stime of a process, in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of stat(5), counted after comm


def machine_busy_ticks():
    """Busy CPU time of the whole machine (all CPUs), in clock ticks, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7]  # user nice system irq softirq steal


def children_ticks():
    """CPU time of this process's finished children (the wrk runs), in clock ticks."""
    t = os.times()
    return (t.children_user + t.children_system) * CLK_TCK


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def nginx_worker(master):
    """The worker's PID (there is exactly one), waiting for the master to start it."""
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            with open(f"/proc/{master}/task/{master}/children") as f:
                children = [int(x) for x in f.read().split()]
        except FileNotFoundError:
            raise SystemExit("bench/redirect: nginx exited; see its error.log")
        if len(children) == 1:
            return children[0]
        time.sleep(0.05)
    raise SystemExit(f"bench/redirect: expected one nginx worker, found {children}")


def pin(pid, cpus):
    """Restricts `pid` (0 = this process) to `cpus`; nothing when pinning is off (`cpus` None)."""
    if cpus:
        try:
            os.sched_setaffinity(pid, cpus)
        except OSError:
            pass


def wait_ports(ports):
    deadline = time.time() + 10
    pending = set(ports)
    while pending and time.time() < deadline:
        for port in list(pending):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                c.connect()
                c.close()
                pending.discard(port)
            except OSError:
                pass
        time.sleep(0.05)
    if pending:
        raise SystemExit(f"bench/redirect: nginx does not listen on {sorted(pending)}")


# --- correctness ------------------------------------------------------------------------------------


def read_lines(path):
    with open(path) as f:
        return [line.rstrip("\n") for line in f if line.strip()]


# BENCH_NOT_FOUND_URL (bench/redirect/run): D's bogus codes answer 302 to it, nobody else's.
NOT_FOUND_URL = os.environ.get("BENCH_NOT_FOUND_URL") or None


def not_found_redirected(server):
    return NOT_FOUND_URL is not None and server == "D"


def check_correctness(args, failures):
    sample = [line.split(" ", 1) for line in read_lines(os.path.join(args.codes_dir, "sample.txt"))]
    bogus = read_lines(os.path.join(args.codes_dir, "bogus.txt"))[:20]
    uniform = read_lines(os.path.join(args.codes_dir, "uniform.txt"))
    step = max(1, len(uniform) // 200)
    spot = [(uniform[i], f"https://example.com/{i}") for i in range(0, len(uniform), step)]
    expected = []  # (path, status, location)
    for code, answer in sample:
        expected.append(("/" + code, 404, None) if answer == "404" else ("/" + code, 302, answer))
    expected += [(path, 404, None) for path in bogus]
    expected += [(path, 302, loc) for path, loc in spot]
    checked = 0
    for server in args.servers:
        # Per server: only D's 404s become redirects (BENCH_NOT_FOUND_URL).
        wanted = [(p, 302, NOT_FOUND_URL) if st == 404 and not_found_redirected(server)
                  else (p, st, loc) for p, st, loc in expected]
        conn = http.client.HTTPConnection("127.0.0.1", args.ports[server], timeout=5)
        # Twice: the second pass answers from C's and D's caches.
        for _ in range(2):
            for path, status, location in wanted:
                if server == "A":
                    status, location = 302, "https://example.com/fixed"
                conn.request("GET", path)
                resp = conn.getresponse()
                resp.read()
                got = (resp.status, resp.getheader("Location"))
                checked += 1
                if got != (status, location):
                    failures.append(f"{server} GET {path}: got {got}, expected {(status, location)}")
        conn.close()
    # Every code's expected Location is known, so B, C and D agree when none of them is wrong.
    log(f"correctness: {checked} requests checked on {', '.join(args.servers)}"
        + (f", {len(failures)} wrong" if failures else ", all as expected"))


def write_header_files(codes_dir):
    """HEADERS, one file each (`<name>-headers.txt`, for wrk-codes.lua); returns their paths."""
    paths = {}
    for name, lines in HEADERS.items():
        paths[name] = os.path.join(codes_dir, f"{name}-headers.txt")
        with open(paths[name], "w") as f:
            f.write("\n".join(lines) + "\n")
    return paths


def check_rules_answers(args):
    """A phone's click on D: the five rules' split for rule codes (a sticky variant), the link's own
    target for capped codes; from a Portuguese address, the country rule's target; the card page
    for a preview fetcher on a carded code."""
    failures = []
    headers = dict(line.split(": ", 1) for line in PHONE)
    for name, prefix in (("rules-hot", ("https://example.com/a", "https://example.com/b")),
                         ("capped-hot", ("https://example.com/",))):
        for path in read_lines(os.path.join(args.codes_dir, f"{name}.txt"))[:20]:
            conn = http.client.HTTPConnection("127.0.0.1", args.ports["D"], timeout=5)
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            location = response.getheader("Location") or ""
            conn.close()
            if response.status != 302 or not location.startswith(prefix):
                failures.append(f"D {name} {path}: got {response.status} {location}")
    # The geo database is mapped and the client comes through X-Forwarded-For: a Portuguese
    # address meets the country rule (else the cells would measure rules without a lookup).
    # A code with a click id parameter: its target with `?sl_click=<16 base64url characters>`.
    for path in read_lines(os.path.join(args.codes_dir, "clickid-hot.txt"))[:20]:
        conn = http.client.HTTPConnection("127.0.0.1", args.ports["D"], timeout=5)
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        location = response.getheader("Location") or ""
        conn.close()
        base, _, click_id = location.partition("?sl_click=")
        if (response.status != 302 or not base.startswith("https://example.com/")
                or len(click_id) != 16):
            failures.append(f"D clickid-hot {path}: got {response.status} {location}")
    for path in read_lines(os.path.join(args.codes_dir, "rules-hot.txt"))[:5]:
        conn = http.client.HTTPConnection("127.0.0.1", args.ports["D"], timeout=5)
        conn.request("GET", path, headers={**headers, "X-Forwarded-For": "193.136.0.1"})
        response = conn.getresponse()
        location = response.getheader("Location") or ""
        conn.close()
        if location != "https://example.com/shop-pt":
            failures.append(f"D rules-hot {path} from Portugal: got {response.status} {location}")
    # A fetcher gets the card page of a carded code (people get its redirect, checked above for
    # the other kinds).
    fetcher = dict(line.split(": ", 1) for line in FETCHER)
    for path in read_lines(os.path.join(args.codes_dir, "card-hot.txt"))[:5]:
        conn = http.client.HTTPConnection("127.0.0.1", args.ports["D"], timeout=5)
        conn.request("GET", path, headers=fetcher)
        response = conn.getresponse()
        page = response.read().decode(errors="replace")
        conn.close()
        if response.status != 200 or 'property="og:title"' not in page:
            failures.append(f"D card-hot {path}: got {response.status} {page[:80]!r}")
    log(f"rules cells: {'all as expected' if not failures else f'{len(failures)} wrong'}")
    return failures


# --- cells ------------------------------------------------------------------------------------------


def run_wrk(args, server, workload, duration):
    codes, headers = RULES_WORKLOADS.get(workload, (workload, None))
    code_file = os.path.join(args.codes_dir, f"{codes}.txt")
    cmd = [
        "wrk", "-t1", f"-c{args.connections}", f"-d{duration:g}s", "--timeout", "2s",
        "-s", args.wrk_script, f"http://127.0.0.1:{args.ports[server]}", "--", code_file,
    ]
    if headers:
        cmd.append(args.header_files[headers])
    # Bounded: wrk stops itself after `duration`; loading a 1M-line code file takes a few seconds.
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 120,
                         preexec_fn=lambda: pin(0, args.pin_cpus))
    for line in out.stdout.splitlines():
        if line.startswith("BENCH "):
            return json.loads(line[len("BENCH "):])
    raise RuntimeError(f"wrk gave no summary (exit {out.returncode}): {out.stderr.strip()}")


def redis_ticks(args, server):
    """CPU of the Redis that `server` reads: the cluster's nodes together for G and R."""
    pids = args.cluster_redis_pids if server in ("G", "R") else [args.redis_pid]
    return sum(cpu_ticks(pid) for pid in pids)


def cell(args, worker, server, workload, round_no):
    cpu0, redis0, rss0 = cpu_ticks(worker), redis_ticks(args, server), rss_kib(worker)
    busy0, wrk0, t0 = machine_busy_ticks(), children_ticks(), time.time()
    r = run_wrk(args, server, workload, args.duration)
    busy1, wrk1, t1 = machine_busy_ticks(), children_ticks(), time.time()
    cpu1, redis1, rss1 = cpu_ticks(worker), redis_ticks(args, server), rss_kib(worker)
    # Everything else that ran on the machine meanwhile (other users' builds, ...), in CPUs; the
    # window includes wrk loading its code file, when it is the only one of ours that works.
    others = (busy1 - busy0) - (cpu1 - cpu0) - (redis1 - redis0) - (wrk1 - wrk0)
    seconds = r["duration_us"] / 1e6
    n = max(r["requests"], 1)
    c = {
        "round": round_no, "server": server, "workload": workload,
        "requests": r["requests"], "rps": r["requests"] / seconds,
        "p50_ms": r["p50_us"] / 1000, "p99_ms": r["p99_us"] / 1000,
        "cpu_us": (cpu1 - cpu0) / CLK_TCK * 1e6 / n,
        "cpu_pct": (cpu1 - cpu0) / CLK_TCK / seconds * 100,
        "redis_us": (redis1 - redis0) / CLK_TCK * 1e6 / n,
        "wrk_us": r["cpu_us"] / n,
        "other_cpus": max(others, 0) / CLK_TCK / (t1 - t0),
        "status_errors": r["status_errors"],
        "socket_errors": r["connect_errors"] + r["read_errors"] + r["write_errors"] + r["timeouts"],
        "rss0": rss0, "rss1": rss1,
    }
    # Every answer must be a redirect, except bogus codes on B, C, D, which must all be 404 (wrk
    # counts them as non-2xx/3xx; exact statuses were checked above).
    bogus_404 = workload == "bogus" and server != "A" and not not_found_redirected(server)
    expect_errors = r["requests"] if bogus_404 else 0
    problems = []
    if r["requests"] == 0:
        problems.append("no requests")
    if c["socket_errors"]:
        problems.append(f"{c['socket_errors']} socket errors/timeouts")
    if r["status_errors"] != expect_errors:
        problems.append(f"{r['status_errors']} non-2xx/3xx of {r['requests']} (expected {expect_errors})")
    c["problems"] = problems
    return c


def error_log_problems(prefix, offset):
    path = os.path.join(prefix, "error.log")
    try:
        with open(path, errors="replace") as f:
            f.seek(offset)
            text = f.read()
    except FileNotFoundError:
        return []
    return [line for line in text.splitlines() if re.search(r"\[(error|crit|alert|emerg)\]", line)]


def log_size(prefix):
    try:
        return os.path.getsize(os.path.join(prefix, "error.log"))
    except FileNotFoundError:
        return 0


# --- report -----------------------------------------------------------------------------------------


def sh(*cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        return (out.stdout + out.stderr).strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def so_id(path):
    """A module .so as the report names it: its path and the start of its SHA-256."""
    try:
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()[:12]
    except OSError:
        digest = "?"
    return f"`{path}` (sha256 {digest})"


def machine(args):
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kib = int(f.readline().split()[1])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    commit = sh("git", "-C", root, "rev-parse", "--short", "HEAD")
    dirty = sh("git", "-C", root, "status", "--porcelain", "--untracked-files=no")
    return {
        "cpus": os.cpu_count(), "model": model, "mem_gib": mem_kib / 2**20,
        "kernel": platform.release(), "os": sh("sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"),
        "nginx": sh("/usr/sbin/nginx", "-v").replace("nginx version: ", ""),
        "redis": sh("redis-server", "--version").split(" sha=")[0],
        "wrk": sh("sh", "-c", "wrk -v 2>&1 | head -1").split(" [")[0],
        "commit": commit + (" (uncommitted changes)" if dirty else "")
        + (f"; module {os.environ['BENCH_MODULE']} (BENCH_MODULE, not this checkout's build)"
           if os.environ.get("BENCH_MODULE") else "")
        + (f"; D's module {so_id(args.module_so)}, O's (BENCH_BASELINE_MODULE) "
           f"{so_id(args.baseline_module)}" if args.baseline_module else ""),
    }


def fmt_rps(x):
    return f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}"


def med(cells, key):
    return statistics.median(c[key] for c in cells)


def cpu_ratios(top, bottom):
    """Worker and Redis CPU per request of cells `top` over cells `bottom` (NaN where `bottom`
    used none)."""
    def ratio(key):
        return med(top, key) / med(bottom, key) if med(bottom, key) > 0 else float("nan")
    return ratio("cpu_us"), ratio("redis_us")


def ratio_table(by, title, top, bottom, targets):
    """A table of server `top` against server `bottom`: each workload of `targets`, its median
    req/s top/bottom (and CPU per request bottom/top) against its minimum."""
    lines = [title, "", f"| workload | {top}/{bottom} | target | |", "|---|---:|---|---|"]
    for w, minimum in targets:
        t, b = by.get((w, top)), by.get((w, bottom))
        if not t or not b:
            continue
        ratio = med(t, "rps") / med(b, "rps")
        cpu = med(b, "cpu_us") / med(t, "cpu_us") if med(t, "cpu_us") > 0 else float("nan")
        met = "met" if ratio >= minimum else "**NOT met**"
        lines.append(f"| {w} | {ratio:.2f} ({cpu:.2f}) | {top}/{bottom} >= {minimum:g} | {met} |")
    return lines + [""]


def report(args, cells, rss, failures, m):
    now = datetime.datetime.now().astimezone()
    L = []
    L.append(f"# Redirect benchmark, {now:%Y-%m-%d %H:%M %Z}" + (" (smoke mode)" if args.smoke else ""))
    L.append("")
    L.append(f"- Machine: {m['cpus']} CPUs, {m['model']}, {m['mem_gib']:.1f} GiB RAM, "
             f"{m['os']}, kernel {m['kernel']}; load average {args.loadavg_start} at the start, "
             f"{loadavg()} at the end")
    L.append(f"- Software: {m['nginx']} (Debian), one worker; {m['redis']}; {m['wrk']}; "
             f"shortlink {m['commit']}")
    L.append(f"- Data: {args.codes:,} codes in Redis (`1|L|302|0|0|https://example.com/<n>`), "
             f"workloads hot = 1,000 codes, uniform = all {args.codes:,}, bogus = "
             f"{min(args.codes, 100000):,} codes of the generated shape with a wrong check character")
    L.append(f"- Load: wrk, 1 thread, {args.connections} connections, {args.duration:g} s a cell, "
             f"{args.rounds} round(s), servers interleaved {' '.join(args.servers)}; all on 127.0.0.1, "
             f"client, nginx and Redis sharing the {m['cpus']} CPUs" +
             (f"; the nginx worker pinned to CPU {min(args.pin_worker)}, wrk to the other(s), "
              f"Redis unpinned" if args.pin_worker else ""))
    L.append(f"- Caches: D `shortlink_cache {args.module_cache}`; C `lua_shared_dict {args.lua_cache}` "
             f"(~{args.cache_entries:,} entries), ttl 10 s, negative ttl 1 s")
    L.append("")
    L.append("Medians across rounds. CPU = nginx worker utime+stime per request (µs); CPU % = the "
             "worker's share of one CPU during the cell; Redis = redis-server CPU per request (µs); "
             "wrk = the client's CPU per request during its run (µs; with the worker pinned, wrk "
             "and Redis share the other CPU, so when wrk + Redis nears 1e6 / req/s that CPU, not "
             "nginx, is the limit); "
             "other load = CPUs busy with anything but nginx, Redis and wrk during the cell (noise "
             "from other users of the machine).")
    L.append("")
    L.append("| workload | server | req/s | req/s per round | p50 ms | p99 ms | CPU µs/req | CPU % "
             "| Redis µs/req | wrk µs/req | other load | non-2xx/3xx |")
    L.append("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    by = {}
    for c in cells:
        by.setdefault((c["workload"], c["server"]), []).append(c)
    for w in WORKLOADS + list(RULES_WORKLOADS):
        for s in args.servers:
            cs = by.get((w, s), [])
            if not cs:
                continue
            errs = sum(c["status_errors"] for c in cs)
            note = " (404, expected)" if w == "bogus" and s != "A" and errs else ""
            L.append(
                f"| {w} | {s} {DESCRIPTION[s]} | {fmt_rps(med(cs, 'rps'))} | "
                f"{' / '.join(fmt_rps(c['rps']) for c in cs)} | {med(cs, 'p50_ms'):.2f} | "
                f"{med(cs, 'p99_ms'):.2f} | {med(cs, 'cpu_us'):.1f} | {med(cs, 'cpu_pct'):.0f} | "
                f"{med(cs, 'redis_us'):.1f} | {med(cs, 'wrk_us'):.1f} | {med(cs, 'other_cpus'):.2f} | "
                f"{errs}{note} |")
    L.append("")
    # Any server with the module: D, its variants, the cluster servers and the baseline.
    if any(s in args.servers for s in "DEFGOR"):
        if "D" in args.servers:
            L.append("Ratios of median req/s (and, in parentheses, of CPU per request: reference / D, "
                     "higher is better for D):")
            L.append("")
            L.append("| workload | D/A | D/B | D/C | target | |")
            L.append("|---|---:|---:|---:|---|---|")
            for w in WORKLOADS:
                d = by.get((w, "D"))
                if not d:
                    continue
                cols = []
                ratio = {}
                for ref in ["A", "B", "C"]:
                    r = by.get((w, ref))
                    if not r:
                        cols.append("—")
                        continue
                    ratio[ref] = med(d, "rps") / med(r, "rps")
                    cpu = med(r, "cpu_us") / med(d, "cpu_us") if med(d, "cpu_us") > 0 else float("nan")
                    cols.append(f"{ratio[ref]:.2f} ({cpu:.2f})")
                target = [t for t in TARGETS if t[0] == w][0]
                if target[2] not in ratio:
                    met = "not measured"  # BENCH_SERVERS left the reference out
                else:
                    met = "met" if ratio[target[2]] >= target[3] else "**NOT met**"
                L.append(f"| {w} | {' | '.join(cols)} | {target[1]}/{target[2]} >= {target[3]:g} | "
                         f"{met} |")
            L.append("")
        if "E" in args.servers:
            L += ratio_table(by, "Tracking: E (D with `shortlink_track on`) against D, median req/s "
                             "(and CPU per request, D / E):", "E", "D", TRACKING_TARGETS)
        if "F" in args.servers:
            L += ratio_table(by, "Per-domain counters: D (on, the default) against F "
                             "(`shortlink_status_domains off`), median req/s (and CPU per request, "
                             "F / D):", "D", "F", DOMAIN_COUNTER_TARGETS)
        if "G" in args.servers and "D" in args.servers:
            L.append("Redis Cluster: G (the module on 3 primaries, `shortlink_redis_cluster`) against "
                     "D (one Redis), same codes, same cache, same run; median req/s G/D, nginx worker "
                     "CPU per request G/D (the accepted measure here) and Redis CPU per request G/D "
                     "(all nodes together):")
            L.append("")
            L.append("| workload | req/s G/D | worker CPU/req G/D | Redis CPU/req G/D |")
            L.append("|---|---:|---:|---:|")
            for w in WORKLOADS:
                d, g = by.get((w, "D")), by.get((w, "G"))
                if not d or not g:
                    continue
                cpu, red = cpu_ratios(g, d)
                L.append(f"| {w} | {med(g, 'rps') / med(d, 'rps'):.2f} | {cpu:.2f} | {red:.2f} |")
            L.append("")
        if "R" in args.servers:
            L += replicas_report(args, by)
        if args.rules:
            L.append("")
            L.append("Click-time rules (issue 34), D only, every request a phone's (a desktop "
                     "Chrome, `Accept-Language: en-US`, client 8.8.8.8 through `X-Forwarded-For`): "
                     "phone = plain codes; rules = codes with five rules (device, language, "
                     "country, query, then a sticky 50/50 split), so each click walks every "
                     "condition, looks its country up in the geo database and lands in the split; "
                     "capped = codes with `max_visits` (one `INCR` a click); card = a messaging "
                     "app's preview fetcher (WhatsApp) on codes with a preview card (issue 35: "
                     "one more Redis read, the card page instead of the redirect). Worker CPU per "
                     "request, workload / reference (lower is better for the workload, the "
                     "accepted measure here), Redis CPU per request of each (µs) and req/s "
                     "workload / reference:")
            L.append("")
            L.append("| workload | reference | worker CPU/req | Redis µs/req | req/s | target | |")
            L.append("|---|---|---:|---:|---:|---|---|")
            for w, ref, maximum in RULES_TARGETS:
                a, b = by.get((w, "D")), by.get((ref, "D"))
                if not a or not b:
                    continue
                cpu = med(a, "cpu_us") / max(med(b, "cpu_us"), 1e-9)
                redis = f"{med(a, 'redis_us'):.1f} / {med(b, 'redis_us'):.1f}"
                rps = med(a, "rps") / max(med(b, "rps"), 1e-9)
                met = "met" if cpu <= maximum else "NOT met"
                L.append(f"| {w} | {ref} | {cpu:.2f} | {redis} | {rps:.2f} | "
                         f"<= {maximum} | {met} |")
            L.append("")
        if "O" in args.servers:
            L.append("Against the baseline build: O (D's configuration on its own nginx, loading "
                     "BENCH_BASELINE_MODULE) and D (this build), same Redis, codes and caches, rounds "
                     "interleaved in the same run; median req/s D/O, nginx worker CPU per request O/D "
                     "and Redis CPU per request O/D (higher is better for D):")
            L.append("")
            L.append("| workload | req/s D/O | D/O per round | worker CPU/req O/D | Redis CPU/req O/D |")
            L.append("|---|---:|---|---:|---:|")
            for w in WORKLOADS:
                d, o = by.get((w, "D")), by.get((w, "O"))
                if not d or not o:
                    continue
                cpu, red = cpu_ratios(o, d)
                rounds = " / ".join(f"{cd['rps'] / co['rps']:.2f}" for cd, co in zip(d, o))
                L.append(f"| {w} | {med(d, 'rps') / med(o, 'rps'):.2f} | {rounds} | {cpu:.2f} | "
                         f"{red:.2f} |")
            L.append("")
    else:
        L.append("The module was left out (`--no-module`): no ratios, targets not measured.")
        L.append("")
    L.append("Memory: nginx worker VmRSS. One worker serves A to F, so it includes the Lua VM and "
             "the pages of C's shared dict it touched; the per-server rows are the change during that "
             "server's uniform cells (in G's and O's own workers for G and O).")
    L.append("")
    L.append("| | KiB |")
    L.append("|---|---:|")
    for label, kib in rss:
        L.append(f"| {label} | {kib:,} |")
    for s in args.servers:
        cs = by.get(("uniform", s), [])
        if cs:
            deltas = " / ".join(f"{c['rss1'] - c['rss0']:+,}" for c in cs)
            L.append(f"| change during {s}'s uniform cells, per round | {deltas} |")
    L.append("")
    L.append(f"Configured caches: D `shortlink_cache {args.module_cache}` (entries, per worker); "
             f"C `lua_shared_dict sl_cache {args.lua_cache}` (bytes, shared).")
    L.append("")
    if failures:
        L.append(f"**{len(failures)} correctness failure(s):**")
        L.append("")
        L += [f"- {f}" for f in failures[:50]]
        L.append("")
    flags = ((" --smoke" if args.smoke else "")
             + ("" if any(s in args.servers for s in "DEFGOR") else " --no-module")
             + (" --rules" if args.rules else "")
             + (" --cluster" if "G" in args.servers or "R" in args.servers else "")
             + (" --replicas" if "R" in args.servers else ""))
    env = f"BENCH_BASELINE_MODULE={args.baseline_module} " if args.baseline_module else ""
    L.append(f"Command: `{env}bench/redirect/run{flags}`; wall time "
             f"{time.time() - args.started:.0f} s.")
    return "\n".join(L) + "\n"


def mget_calls(args):
    """{role: MGETs served} over the cluster's nodes (`INFO commandstats`), by `ROLE`."""
    calls = {}
    for port in filter(None, args.cluster_ports.split(",")):
        def cli(*words):
            return subprocess.run(["redis-cli", "-p", port, *words], capture_output=True,
                                  text=True, timeout=10).stdout
        role = cli("role").split("\n", 1)[0].strip()
        n = 0
        for line in cli("info", "commandstats").splitlines():
            if line.startswith("cmdstat_mget:calls="):
                n = int(line.split("=", 1)[1].split(",", 1)[0])
        calls[role] = calls.get(role, 0) + n
    return calls


def replicas_report(args, by):
    """G (reading primaries) against R (reading replicas) on the same cluster."""
    L = ["Cluster replicas: R (`read_replicas=127.0.0.0/8`: each slot read from its primary's "
         "replica) against G (the primaries), same cluster, codes and cache, same run; median "
         "worker CPU per request G/R (the accepted measure here; >= 0.9 means a lookup on a replica "
         "costs the worker at most ~11% more), Redis CPU per request G/R (all six nodes), req/s R/G:",
         "", "| workload | worker CPU/req G/R | target | | Redis CPU/req G/R | req/s R/G |",
         "|---|---:|---|---|---:|---:|"]
    targets = dict(REPLICA_TARGETS)
    for w in WORKLOADS:
        g, r = by.get((w, "G")), by.get((w, "R"))
        if not g or not r:
            continue
        cpu = med(g, "cpu_us") / med(r, "cpu_us") if med(r, "cpu_us") > 0 else float("nan")
        red = med(g, "redis_us") / med(r, "redis_us") if med(r, "redis_us") > 0 else float("nan")
        target, met = "", ""
        if w in targets:
            target = f">= {targets[w]:g}"
            met = "met" if cpu >= targets[w] else "**NOT met**"
        L.append(f"| {w} | {cpu:.2f} | {target} | {met} | {red:.2f} | "
                 f"{med(r, 'rps') / med(g, 'rps'):.2f} |")
    start, end = args.mgets_start, getattr(args, "mgets_end", {})
    served = {role: end.get(role, 0) - start.get(role, 0) for role in end}
    L += ["", f"MGETs served during the cells: primaries {served.get('master', 0):,}, replicas "
          f"{served.get('slave', 0):,} (G's lookups go to primaries, R's to replicas).", ""]
    return L


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    args = parse_args()
    args.loadavg_start = loadavg()
    if args.rules:
        args.header_files = write_header_files(args.codes_dir)
    failures = []
    wait_ports([args.ports[s] for s in args.servers])
    worker = nginx_worker(args.nginx_pid)
    workers = {s: worker for s in args.servers}
    if "G" in args.servers:
        workers["G"] = nginx_worker(args.cluster_nginx_pid)
    if "O" in args.servers:
        workers["O"] = nginx_worker(args.baseline_nginx_pid)
    if "R" in args.servers:
        workers["R"] = nginx_worker(args.replicas_nginx_pid)
    # The worker gets a CPU of its own and wrk the other, so that the two do not take turns on
    # one core (which made cells vary 2x between rounds); Redis floats, as its cost is part of
    # what B, C and D are compared on.
    cpus = sorted(os.sched_getaffinity(0))
    args.pin_cpus = None
    args.pin_worker = None
    if args.pin and len(cpus) >= 2:
        args.pin_worker, args.pin_cpus = {cpus[-1]}, set(cpus[:-1])
        for w in set(workers.values()):
            pin(w, args.pin_worker)
        log(f"pinned: nginx worker on CPU {cpus[-1]}, wrk on CPU {','.join(map(str, cpus[:-1]))}")
    log(f"nginx master {args.nginx_pid}, worker {worker}; servers " +
        ", ".join(f"{s}=:{args.ports[s]}" for s in args.servers)
        + "".join(f"; {s}'s worker {workers[s]}" for s in ("G", "O", "R") if s in workers))
    log_offset = log_size(args.prefix)
    g_offset = log_size(args.cluster_prefix) if args.cluster_prefix else 0
    o_offset = log_size(args.baseline_prefix) if args.baseline_prefix else 0
    r_offset = log_size(args.replicas_prefix) if args.replicas_prefix else 0
    args.mgets_start = mget_calls(args)
    check_correctness(args, failures)
    if args.rules:
        failures += check_rules_answers(args)
    if failures:
        for f in failures[:20]:
            log(f"WRONG: {f}")
    if args.warmup > 0:
        log(f"warm-up: {args.warmup:g} s per server")
        for s in args.servers:
            run_wrk(args, s, "hot", args.warmup)

    cells = []
    rss = [("at start (after the correctness check and warm-up)", rss_kib(worker))]
    plan = [(w, s) for w in WORKLOADS for s in args.servers]
    if args.rules:
        plan += [(w, "D") for w in RULES_WORKLOADS]
    total = args.rounds * len(plan)
    for round_no in range(1, args.rounds + 1):
        for w, s in plan:
            if w == "uniform" and s == args.servers[0]:
                rss.append((f"round {round_no}, before the uniform cells", rss_kib(worker)))
            c = cell(args, workers[s], s, w, round_no)
            cells.append(c)
            if w == "uniform" and s == args.servers[-1]:
                rss.append((f"round {round_no}, after the uniform cells", rss_kib(worker)))
            log(f"[{len(cells)}/{total}] round {round_no} {w:13} {s}: {fmt_rps(c['rps'])} req/s, "
                f"p99 {c['p99_ms']:.2f} ms, {c['cpu_us']:.1f} µs CPU/req, wrk {c['wrk_us']:.1f} µs/req"
                + (f" — {'; '.join(c['problems'])}" if c["problems"] else ""))
            failures += [f"round {round_no} {w} {s}: {p}" for p in c["problems"]]
    bad_log = error_log_problems(args.prefix, log_offset)
    if args.cluster_prefix:
        bad_log += error_log_problems(args.cluster_prefix, g_offset)
    if args.baseline_prefix:
        bad_log += error_log_problems(args.baseline_prefix, o_offset)
    if args.replicas_prefix:
        bad_log += error_log_problems(args.replicas_prefix, r_offset)
    args.mgets_end = mget_calls(args)
    failures += [f"nginx error.log: {line}" for line in bad_log[:10]]

    text = report(args, cells, rss, failures, machine(args))
    print(text)
    if args.out:
        out = args.out
        base, ext = os.path.splitext(out)
        n = 2
        while os.path.exists(out):
            out = f"{base}-{n}{ext}"
            n += 1
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "w") as f:
            f.write(text)
        log(f"written to {out}")
    if failures:
        log(f"FAILED: {len(failures)} correctness problem(s) (see the report)")
        return 1
    log("every cell ran and answered correctly")
    return 0


if __name__ == "__main__":
    sys.exit(main())
