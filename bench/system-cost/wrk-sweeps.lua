-- wrk script for bench/system-cost's reclassification mode (issue 78, BENCH_RECLASSIFY): every
-- request is GET /<code> for a code picked at random from the code file (one campaign's links),
-- sent by a person or, for SHARE of the requests, by a scanner sweeping the campaign.
--
-- People: an address at random in 10.0.0.0/8 (X-Forwarded-For, which scripts/run's nginx takes
-- from loopback) and one of 64 phone agents, with Accept-Language as a browser sends it. A
-- sweep is one /24 and one agent reaching five links of a campaign within 10 s
-- (docs/BOTS.md, signal 7): at 40,000 redirects a second, 65,536 networks times 8 agents
-- still let about 1% of people's visits meet five of a kind; times 64 almost none.
-- Scanners: each sweep is one /24 of 100.64.0.0/10, one desktop Chrome agent (what carriers'
-- scanners send; 16 builds of it), five links. Each thread keeps SWEEPS sweeps going at once,
-- round robin, so that a sweep's five visits are a full turn of the slots apart: with a turn
-- longer than the consumer's read (16,000 to 32,000 visits, under a second at 50,000 redirects
-- a second), its first four are stored as people's and corrected, after the fact, by the fifth
-- (hindsight), and the whole sweep stays within the 10 s window while a turn is under 2.5 s.
-- A sweep's (network, agent) is its own for the thread's next 16,383 sweeps: a sweep that
-- reused the one of a sweep under way (within 10 s of its last visit) would be judged a
-- scanner's at once, the track still swept, and nothing would be corrected.
-- Arguments after `--`: CODE_FILE SHARE [SWEEPS, default 32; bench/system-cost/run sizes it
-- from the people-only round's rate for a turn of about 1 s].
-- done() prints the same "BENCH " JSON line as bench/redirect/wrk-codes.lua.

local paths = {}
local count = 0
local threads = {}
local PEOPLE = {}
for i = 0, 63 do
    PEOPLE[#PEOPLE + 1] = string.format("Mozilla/5.0 (iPhone; CPU iPhone OS 17_%d_%d like Mac OS X) "
        .. "AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.%d Mobile/15E148 Safari/604.1",
        math.floor(i / 8), i % 8, math.floor(i / 8))
end
local SCANNERS = {}
for major = 111, 126 do
    SCANNERS[#SCANNERS + 1] = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 "
        .. string.format("(KHTML, like Gecko) Chrome/%d.0.0.0 Safari/537.36", major)
end
-- /24s of 100.64.0.0/10, taken in steps of 16 (one per wrk thread, at most 16 here).
local NETWORKS = 16384
local THREAD_NETWORKS = NETWORKS / 16

function setup(thread)
    table.insert(threads, thread)
    thread:set("id", #threads - 1)
end

function init(args)
    local file = assert(args[1], "usage: wrk -s wrk-sweeps.lua URL -- CODE_FILE SHARE [SWEEPS]")
    share = tonumber(args[2] or "0")
    sweeps = tonumber(args[3] or "32")
    for path in io.lines(file) do
        if path ~= "" then
            count = count + 1
            paths[count] = path
        end
    end
    assert(count >= 5, "a sweep needs five links in " .. file)
    math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
    slots = {}
    next_sweep = 0
    for s = 1, sweeps do
        slots[s] = new_sweep()
    end
    turn = 0
    cpu_before_run = os.clock()
end

-- Sweep i of this thread (i from 0) uses network (i mod 1024) * 16 + id, so threads never share
-- one, and agent floor(i / 1024) mod 16: a (network, agent) comes back after 16,384 sweeps.
function new_sweep()
    local i = next_sweep
    next_sweep = next_sweep + 1
    return {
        network = (i % THREAD_NETWORKS) * 16 + id,
        agent = SCANNERS[math.floor(i / THREAD_NETWORKS) % #SCANNERS + 1],
        left = 5,
    }
end

local function scanner_request()
    turn = turn % sweeps + 1
    local slot = slots[turn]
    local network = slot.network
    local address = string.format("100.%d.%d.%d", 64 + math.floor(network / 256), network % 256,
        math.random(1, 254))
    slot.left = slot.left - 1
    if slot.left == 0 then
        slots[turn] = new_sweep()
    end
    return address, slot.agent
end

function request()
    local address, agent
    if math.random() < share then
        address, agent = scanner_request()
    else
        address = string.format("10.%d.%d.%d", math.random(0, 255), math.random(0, 255),
            math.random(1, 254))
        agent = PEOPLE[math.random(#PEOPLE)]
    end
    return wrk.format("GET", paths[math.random(count)], {
        ["Host"] = "localhost",
        ["User-Agent"] = agent,
        ["Accept-Language"] = "en-US,en;q=0.9",
        ["X-Forwarded-For"] = address,
    })
end

function done(summary, latency, requests)
    local e = summary.errors
    local before = 0
    for _, thread in ipairs(threads) do
        before = math.max(before, thread:get("cpu_before_run") or 0)
    end
    io.write(string.format(
        'BENCH {"requests": %d, "duration_us": %d, "bytes": %d, "connect_errors": %d, '
            .. '"read_errors": %d, "write_errors": %d, "timeouts": %d, "status_errors": %d, '
            .. '"p50_us": %d, "p90_us": %d, "p99_us": %d, "max_us": %d, "cpu_us": %d}\n',
        summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.timeout,
        e.status, latency:percentile(50), latency:percentile(90), latency:percentile(99),
        latency.max, (os.clock() - before) * 1e6))
end
