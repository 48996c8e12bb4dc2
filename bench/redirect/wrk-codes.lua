-- wrk script for the redirect benchmark: every request is GET /<code> for a code picked uniformly
-- at random from the code file given after `--` (one path a line), with the headers of an optional
-- second file. Requests are formatted once in
-- init(), so request() costs wrk a random number and a table index.
-- done() prints one JSON line (prefixed "BENCH ") that bench/redirect/measure.py reads, with wrk's
-- own CPU time during the run: on two cores the client shares a CPU with Redis, so its cost per
-- request says when the client, not the server under test, is what runs out.

local requests = {}
local count = 0
local threads = {}

-- Runs in the main state, once per thread, before the thread's init().
function setup(thread)
    table.insert(threads, thread)
end

function init(args)
    local file = assert(args[1], "usage: wrk -s wrk-codes.lua URL -- CODE_FILE [HEADER_FILE]")
    -- An optional second file of "Name: value" lines sent with every request (a phone's agent,
    -- language and address for the click-time rules cells).
    local headers = {}
    if args[2] then
        for line in io.lines(args[2]) do
            local name, value = line:match("^([^:]+):%s*(.*)$")
            if name then headers[name] = value end
        end
    end
    for path in io.lines(file) do
        if path ~= "" then
            count = count + 1
            requests[count] = wrk.format("GET", path, headers)
        end
    end
    assert(count > 0, "no codes in " .. file)
    math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
    -- Process CPU time (every thread's) once this thread's code file is loaded: wrk loads all
    -- of them before the run starts, so the run's own CPU is what done() sees beyond the last.
    cpu_before_run = os.clock()
end

function request()
    return requests[math.random(count)]
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
