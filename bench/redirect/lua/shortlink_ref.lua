-- The reference the module is measured against (servers B and C of the redirect benchmark): what a
-- user would write instead of the module, in OpenResty style on Debian's nginx 1.22 —
-- lua-resty-redis (Debian package lua-nginx-redis, module name "nginx.redis") with a keepalive
-- pool, optionally behind an ngx.shared.DICT cache. It answers like the module does for the
-- records the benchmark loads: link record v1 (docs/ARCHITECTURE.md), 404 for no key, 503 on a
-- Redis error. It cannot check the keyed check character (no secret, no SipHash in Lua), so bogus
-- codes cost it a Redis round trip: that is the honest reference.

local redis = require "nginx.redis"

local ngx = ngx
local null = ngx.null
local tonumber = tonumber
local find = string.find
local match = string.match
local sub = string.sub

local M = {}

local conf = {
    host = "127.0.0.1",
    port = 6379,
    timeout_ms = 1000,
    pool_size = 128, -- >= wrk's connections: every in-flight request keeps its own Redis connection
    idle_ms = 60000,
    ttl = 10,
    negative_ttl = 1,
}

function M.configure(options)
    for k, v in pairs(options) do
        conf[k] = v
    end
end

-- record or false (no such key), or nil, err
local function fetch(code)
    local red = redis:new()
    red:set_timeout(conf.timeout_ms) -- lua-resty-redis 0.27 (Debian 12) has no set_timeouts
    local ok, err = red:connect(conf.host, conf.port)
    if not ok then
        return nil, err
    end
    local res, gerr = red:get("sl:c:" .. code)
    if not res then
        red:close()
        return nil, gerr
    end
    red:set_keepalive(conf.idle_ms, conf.pool_size)
    if res == null then
        return false
    end
    return res
end

local function answer(record)
    -- 1|<state>|<status>|<expires_at>|<flags>|<target>; the target is last and may contain '|'.
    local state, status, expires, flags, target =
        match(record, "^1|([LR])|(%d%d%d)|(%d+)|(%d+)|(.*)$")
    if not state then
        ngx.log(ngx.ERR, "unreadable link record")
        return ngx.exit(503)
    end
    if state == "R" then
        return ngx.exit(410)
    end
    expires = tonumber(expires)
    if expires ~= 0 and expires <= ngx.time() then
        return ngx.exit(410)
    end
    if tonumber(flags) % 2 == 1 then
        local args = ngx.var.args
        if args then
            target = target .. (find(target, "?", 1, true) and "&" or "?") .. args
        end
    end
    return ngx.redirect(target, tonumber(status))
end

-- content_by_lua handler; cache is an ngx.shared.DICT or nil.
function M.handle(cache)
    local code = sub(ngx.var.uri, 2)
    -- The module's cheap shape test: [A-Za-z0-9_-]{3,64}, else 404 without a lookup.
    local n = #code
    if n < 3 or n > 64 or find(code, "[^%w_-]") then
        return ngx.exit(404)
    end
    local record
    if cache then
        record = cache:get(code)
        if record == "" then
            return ngx.exit(404)
        end
    end
    if not record then
        local err
        record, err = fetch(code)
        if record == nil then
            ngx.log(ngx.ERR, "redis: ", err)
            return ngx.exit(503)
        end
        if record == false then
            if cache then
                cache:set(code, "", conf.negative_ttl)
            end
            return ngx.exit(404)
        end
        if cache then
            cache:set(code, record, conf.ttl)
        end
    end
    return answer(record)
end

return M
