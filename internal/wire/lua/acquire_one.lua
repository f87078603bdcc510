-- acquire_one.lua: the common case of acquire.lua, written out; it comes
-- first in the acquire script, before horizon.lua and node.lua are even
-- defined, and the rest of the script runs only when it does not return.
-- KEYS and ARGV are acquire.lua's.
--
-- The common case is one key, and a marker up to date (the same process,
-- not promoted since: LASTSAVE and the replication ID as recorded) that
-- lets the node grant and records no long grant (ttl1 0), for a grant
-- that the marker's horizon of all grants already covers or that is not
-- long itself (see hold in horizon.lua). This part reads and decides
-- exactly what marker, standing, grant, hold and held do in that case,
-- with fewer fields, numbers, tables and functions: the scripting
-- engine's cost per operation, not the commands, is most of what the
-- general code costs the server. Anything else falls through to the
-- general code, and nothing has been written by then. The format (${FORMAT})
-- is node.lua's FORMAT.
local n = tonumber(ARGV[4]) or 1
local ttl, quarantine = tonumber(ARGV[2]), tonumber(ARGV[3])
if n == 1 then
	local t = redis.call('TIME')
	local m = redis.call('HMGET', KEYS[2], 'v', 'lastsave', 'replid', 'start', 'quiet', 'ttl1', 'until2', 'ttl2', 'fence')
	local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
	local start, hi2, ttl2 = tonumber(m[4]), tonumber(m[7]), tonumber(m[8])
	local e = now + ttl * 1000
	local covered = hi2 and ttl2 and e <= hi2 and ttl <= ttl2
	local ok = m[1] == ${FORMAT} and m[6] == '0' and m[3] and start and hi2 and ttl2 and (covered or ttl <= ${LONG_GRANT})
		and tonumber(m[2]) == redis.pcall('LASTSAVE')
	if ok and quarantine > 0 then
		local repl = redis.pcall('INFO', 'replication')
		ok = type(repl) == 'string' and string.find(repl, 'master_replid:' .. m[3] .. '\r', 1, true)
			and now - start >= math.max(quarantine, ttl) * 1000 and (m[5] == '0' or (tonumber(m[5]) or 0) <= now)
	end
	if ok then
		local age = math.max(math.floor((now - start) / 1000), 0)
		local left = hi2 > now and ttl2 or 0
		local fence = tonumber(m[9]) or 0
		local v = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2], 'GET')
		if not v then
			fence = math.max(fence + 1, now)
			if covered then
				redis.call('HSET', KEYS[2], 'fence', string.format('%d', fence))
				return {1, fence, age, ttl2}
			end
			-- hold's last case: the horizon of all grants grows, with as
			-- much again to spare.
			hi2, ttl2 = math.max(hi2, e + ttl * 1000), math.max(left, ttl)
			redis.call('HSET', KEYS[2], 'fence', string.format('%d', fence), 'until2', string.format('%d', hi2), 'ttl2', ttl2)
			return {1, fence, age, ttl2}
		elseif v == ARGV[1] then
			return {1, fence, age, math.max(left, ttl)}
		end
		return {0, redis.call('PTTL', KEYS[1]), age, left}
	end
end
