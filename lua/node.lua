-- node.lua: what every script that needs the node's clock and memory
-- starts with. It is prepended to acquire.lua and probe.lua.
--
-- The node keeps a small hash, the marker (KEYS[3] in acquire, KEYS[1] in
-- probe), with three fields:
--   start     when this redis-server process started, in microseconds of
--             the node's clock;
--   maxttl    the largest lock TTL, in milliseconds, that any client has
--             used on the node since then;
--   lastsave  the LASTSAVE the marker last saw.
-- The marker has no expiry. A node that restarts without persistence (or
-- is flushed) loses it together with its lock keys; the next script finds
-- it missing and writes it anew, with the process start time read from
-- INFO. A node that restarts from an RDB snapshot or an append-only file
-- gets the old marker back, but not the grants made after it was saved:
-- LASTSAVE, which Redis sets to the time it starts, tells the script to
-- look again. INFO runs only then, or after a save: it is too costly for
-- every call.

-- now_us returns the node's clock in microseconds. Microseconds since 1970
-- are about 1.8e15, below 2^53, so a Lua number (a double) holds them
-- exactly.
local function now_us()
	local t = redis.call('TIME')
	return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- marker returns the process start (µs) and the largest TTL (ms) recorded
-- in the marker, writing the marker first if it is missing or may be out
-- of date.
local function marker(key, now)
	local m = redis.call('HMGET', key, 'start', 'maxttl', 'lastsave')
	local start, maxttl = tonumber(m[1]), tonumber(m[2]) or 0
	local lastsave = redis.pcall('LASTSAVE')
	if type(lastsave) ~= 'number' then
		lastsave = 0 -- a server without LASTSAVE: rely on a missing marker
	end
	if not start or tonumber(m[3]) ~= lastsave then
		-- uptime_in_seconds is the difference of two clock readings, each
		-- cut to whole seconds: a process that started at 0.9s reads 1 at
		-- 1.0s. A second less than it says is never more than the true
		-- age, so the node's age is never overstated. A server that does
		-- not report its uptime is taken to have just started. A start
		-- only ever moves forward, which errs on the safe side too.
		local info = redis.pcall('INFO', 'server')
		local up = type(info) == 'string' and tonumber(string.match(info, 'uptime_in_seconds:(%d+)')) or 0
		start = math.max(start or 0, now - math.max(up - 1, 0) * 1000000)
		redis.call('HSET', key, 'start', string.format('%d', start), 'lastsave', lastsave)
	end
	return start, maxttl
end
