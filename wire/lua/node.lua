-- node.lua: what every script that needs the node's clock and memory
-- starts with. It is prepended to probe.lua and to the scripts that grant:
-- acquire.lua, acquire_all.lua, acquire_permit.lua, rw_read.lua and
-- rw_write.lua.
--
-- The node keeps a small hash per cluster hash slot, the marker (KEYS[3] in
-- acquire, KEYS[1] in probe), with four fields:
--   start     when this redis-server process started, or was promoted from
--             replica to master, in microseconds of the node's clock;
--   maxttl    the largest lock TTL, in milliseconds, that any client has
--             used in the slot since then;
--   lastsave  the LASTSAVE the marker last saw;
--   replid    the replication ID the marker last saw.
-- The marker has no expiry. A node that restarts without persistence (or
-- is flushed) loses it together with its lock keys; the next script finds
-- it missing and writes it anew, with the process start time read from
-- INFO. A node that restarts from an RDB snapshot or an append-only file
-- gets the old marker back, but not the grants made after it was saved:
-- LASTSAVE, which Redis sets to the time it starts, tells the script to
-- look again. INFO server runs only then, or after a save: it is too
-- costly for every call.
--
-- A replica promoted to master has its old master's records, but not the
-- grants its master made after the link between them last carried them.
-- Promotion gives the node a new replication ID and remembers that it
-- happened (second_repl_offset is no longer -1); INFO replication, which
-- costs about a microsecond, tells both on every call. A marker that saw
-- another replication ID, or no marker at all, on a node promoted since
-- its process started, is a promotion the marker has not seen: the slot
-- starts anew, as after a restart. A marker that a reshard brought from
-- another master (MIGRATE keeps its fields) has another replication ID too;
-- it starts anew only if this node was ever promoted, which errs on the
-- safe side.

-- now_us returns the node's clock in microseconds. Microseconds since 1970
-- are about 1.8e15, below 2^53, so a Lua number (a double) holds them
-- exactly.
local function now_us()
	local t = redis.call('TIME')
	return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- info returns the text of one INFO section, or '' from a server that does
-- not have the section (the in-process server of the redlock demo). Any
-- other error is raised: a user whose ACL denies INFO is refused, rather
-- than given a client that cannot see restarts and promotions.
local function info(section)
	local r = redis.pcall('INFO', section)
	if type(r) == 'string' then
		return r
	end
	if string.find(r.err, 'not supported', 1, true) then
		return ''
	end
	return redis.call('INFO', section) -- raises the error again, as a call
end

-- marker returns the start (µs) and the largest TTL (ms) recorded in the
-- marker, writing the marker first if it is missing or may be out of date.
-- With promotions false, a caller that will not use the start (a client
-- without quarantine) saves the INFO call that a promotion needs: the next
-- caller that asks sees the promotion.
--
-- On the common path, a marker up to date, the replication ID is only
-- looked for in the INFO text; it is parsed only to write a marker.
local function marker(key, now, promotions)
	local m = redis.call('HMGET', key, 'start', 'maxttl', 'lastsave', 'replid')
	local start, maxttl = tonumber(m[1]), tonumber(m[2]) or 0
	local lastsave = redis.pcall('LASTSAVE')
	if type(lastsave) ~= 'number' then
		lastsave = 0 -- a server without LASTSAVE: rely on a missing marker
	end
	local repl
	if start and tonumber(m[3]) == lastsave and m[4] then
		if not promotions then
			return start, maxttl
		end
		repl = info('replication')
		if (m[4] == '' and repl == '') or string.find(repl, 'master_replid:' .. m[4] .. '\r', 1, true) then
			return start, maxttl
		end
	end
	repl = repl or info('replication')
	local replid = string.match(repl, 'master_replid:(%w+)') or ''
	-- The parentheses make a failed match one nil, which tonumber takes,
	-- in every Lua (the in-process server's match returns no value).
	local promoted = (tonumber((string.match(repl, 'second_repl_offset:(%-?%d+)'))) or -1) ~= -1
	if promoted and (not start or (m[4] and m[4] ~= replid)) then
		-- A promotion this slot's marker has not seen: its locks may be
		-- missing here, so the slot counts as just started.
		start = math.max(start or 0, now)
	else
		-- uptime_in_seconds is the difference of two clock readings, each
		-- cut to whole seconds: a process that started at 0.9s reads 1 at
		-- 1.0s. A second less than it says is never more than the true
		-- age, so the node's age is never overstated. A server that does
		-- not report its uptime is taken to have just started. A start
		-- only ever moves forward, which errs on the safe side too.
		local up = tonumber((string.match(info('server'), 'uptime_in_seconds:(%d+)'))) or 0
		start = math.max(start or 0, now - math.max(up - 1, 0) * 1000000)
	end
	redis.call('HSET', key, 'start', string.format('%d', start), 'lastsave', lastsave, 'replid', replid)
	return start, maxttl
end

-- standing returns the node's age in the slot of the marker at key, in
-- milliseconds, and the largest TTL the marker records, having first
-- recorded ttl and quarantine (ms) there if either is larger. A script
-- that grants refuses while quarantine > 0 and age < maxttl: the node
-- restarted, or was promoted, too recently to know which locks it lost.
local function standing(key, now, ttl, quarantine)
	local start, maxttl = marker(key, now, quarantine > 0)
	if quarantine > maxttl or ttl > maxttl then
		maxttl = math.max(quarantine, ttl, maxttl)
		redis.call('HSET', key, 'maxttl', maxttl)
	end
	-- After the node's clock has stepped back, start can lie ahead of now.
	return math.max(math.floor((now - start) / 1000), 0), maxttl
end
