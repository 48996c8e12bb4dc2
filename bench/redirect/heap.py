"""glibc's allocator's share of a callgrind dump: its own instructions, and the calls made into it.

What a malloc or a free costs depends on the heap's layout, which a process's whole history sets:
under bench/redirect/instructions.py, nginx's two 4 KiB request pools a request cost 222, 347 or
575 instructions in `_int_malloc` alone, from one run of a build to the next and between cells of
one nginx, with the same calls. The calls are what a build decides; so a cell's count prices
them at one rate (instructions.py: `return 302`'s own, A hot's, measured in the same run), and
the allocator's instructions beyond it are left out as noise.
"""

ALLOCATOR_FILES = ("/malloc/malloc.c", "/malloc/arena.c", "/malloc/hooks.c")


def allocator(path):
    """(instructions inside glibc's allocator, calls into it from outside) of the dump `path`
    (written with `--compress-strings=no`, `--dump-instr=no`)."""
    self_cost, calls, inside = {}, {}, set()
    fl = fn = callee = None
    after_call = False
    with open(path) as f:
        for line in f:
            if line.startswith("fl="):
                fl = line[3:].strip()
            elif line.startswith("fn="):
                fn = line[3:].strip()
                if fl and fl.endswith(ALLOCATOR_FILES):
                    inside.add(fn)
            elif line.startswith("cfn="):
                callee = line[4:].strip()
            elif line.startswith("calls="):
                count = int(line[6:].split()[0])
                calls[(fn, callee)] = calls.get((fn, callee), 0) + count
                after_call = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                if after_call:  # the call's inclusive cost, not the caller's own
                    after_call = False
                    continue
                fields = line.split()
                if len(fields) > 1:
                    self_cost[fn] = self_cost.get(fn, 0) + int(fields[1])
    instructions = sum(cost for name, cost in self_cost.items() if name in inside)
    entered = sum(n for (caller, name), n in calls.items()
                  if name in inside and caller not in inside)
    return instructions, entered
