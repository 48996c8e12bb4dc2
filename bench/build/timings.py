#!/usr/bin/env python3
"""Reads a `cargo build --timings` report: the longest units, the critical path, the link steps.

Usage: bench/build/timings.py target/cargo-timings/cargo-timing.html [--top N]

The critical path is the chain of units, each unblocked by the one before it, that ends last: the
build can take no less than its sum, whatever the number of cores.
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
    by_index = {unit["i"]: unit for unit in units}
    unblocked_by = {}
    for unit in units:
        for after in unit["unblocked_units"] + unit["unblocked_rmeta_units"]:
            unblocked_by.setdefault(after, []).append(unit["i"])
    last = max(units, key=lambda unit: unit["start"] + unit["duration"])
    path = [last]
    while unblocked_by.get(path[-1]["i"]):
        before = [by_index[i] for i in unblocked_by[path[-1]["i"]]]
        path.append(max(before, key=lambda unit: unit["start"] + unit["duration"]))
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
    print("\ncritical path (start, duration):")
    for unit in critical_path(units):
        print(f'  {unit["start"]:7.1f} s {unit["duration"]:7.1f} s  {label(unit)}')
    print("\nlinks (binaries and cdylibs: the codegen unit that ends in a link):")
    for unit in units:
        if unit["target"].strip().startswith(("bin", "lib")) and unit["name"] in (
            "shortlink-sidecar",
            "ngx-shortlink",
        ):
            sections = unit.get("sections") or []
            print(f'  {unit["duration"]:7.1f} s  {label(unit)}  sections: {sections}')


main()
