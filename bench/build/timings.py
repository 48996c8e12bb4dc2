#!/usr/bin/env python3
"""Reads a `cargo build --timings` report: the longest units, the critical path, the link steps.

Usage: bench/build/timings.py target/cargo-timings/cargo-timing.html [--top N]

The critical path printed is the chain that ended the build: each unit unblocked by the one before
it, back from the last to finish. Gaps in its start times are waits for a free core.
"""
import json
import re
import sys


def load(path):
    html = open(path, encoding="utf-8").read()
    found = re.search(r"const UNIT_DATA = (\[.*?\]);\n", html, re.S)
    if not found:
        sys.exit(f"{path}: no UNIT_DATA (not a cargo --timings report?)")
    return json.loads(found.group(1))


def label(unit):
    target = unit["target"].strip() or "lib"
    return f'{unit["name"]} v{unit["version"]} {target}'


def critical_path(units):
    """The chain that ended the build: from the last unit to finish, back through the unit whose
    end unblocked each (its last dependency to finish, as the build was scheduled on its cores;
    the report records no other edges)."""
    by_index = {unit["i"]: unit for unit in units}
    unblocked_by = {}
    for unit in units:
        for after in unit["unblocked_units"] + unit["unblocked_rmeta_units"]:
            unblocked_by[after] = unit["i"]
    path = [max(units, key=lambda unit: unit["start"] + unit["duration"])]
    while path[-1]["i"] in unblocked_by:
        path.append(by_index[unblocked_by[path[-1]["i"]]])
    return list(reversed(path))


def main():
    args = sys.argv[1:]
    top = 20
    if "--top" in args:
        at = args.index("--top")
        top = int(args[at + 1])
        del args[at : at + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    units = load(args[0])
    end = max(unit["start"] + unit["duration"] for unit in units)
    busy = sum(unit["duration"] for unit in units)
    print(f"{len(units)} units, wall {end:.0f} s, unit time {busy:.0f} s")
    print(f"\nlongest {top} units:")
    for unit in sorted(units, key=lambda unit: -unit["duration"])[:top]:
        print(f'  {unit["duration"]:7.1f} s  {label(unit)}')
    print("\ncritical path, as scheduled (start, duration; units under 0.5 s left out):")
    for unit in critical_path(units):
        if unit["duration"] >= 0.5:
            print(f'  {unit["start"]:7.1f} s {unit["duration"]:7.1f} s  {label(unit)}')
    print("\nthe two crates scripts/run needs (the last compile of each ends in its link):")
    for unit in units:
        if unit["name"] in ("shortlink-sidecar", "ngx-shortlink") and "build-script" not in unit["target"]:
            print(f'  {unit["duration"]:7.1f} s  {label(unit)}')


main()
