-- wrk script for the soak: GET /<code> round robin over the code file given after `--`, paced so
-- that all connections together send about RATE requests/s (wrk's delay() per request, in ms).
-- done() prints one line "SOAK requests=N errors=N non3xx=N p99_us=N" for bench/soak/run.

local paths, count, i = {}, 0, 0
local pause_ms = 0

function init(args)
    local file = assert(args[1], "usage: wrk -s paced.lua URL -- CODE_FILE RATE CONNECTIONS")
    for path in io.lines(file) do
        if path ~= "" then
            count = count + 1
            paths[count] = wrk.format("GET", path)
        end
    end
    assert(count > 0, "no codes in " .. file)
    local rate, connections = tonumber(args[2]), tonumber(args[3])
    pause_ms = math.floor(1000 * connections / rate)
end

function delay()
    return pause_ms
end

function request()
    i = i % count + 1
    return paths[i]
end

function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format("SOAK requests=%d errors=%d non3xx=%d p99_us=%d max_us=%d\n",
        summary.requests, e.connect + e.read + e.write + e.timeout, e.status,
        latency:percentile(99), latency.max))
end
