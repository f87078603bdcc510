-- node.lua: what every script that needs the node's memory starts with,
-- after horizon.lua. Both are prepended to probe.lua, rw_extend.lua and to
-- the scripts that grant: acquire.lua, acquire_permit.lua, rw_read.lua
-- and rw_write.lua; extend.lua takes horizon.lua alone. The acquire
-- script runs acquire_one.lua, its common case written out, before both.
--
-- The node keeps a small hash per cluster hash slot, the marker (KEYS[3] in
-- acquire, KEYS[1] in probe), with these fields:
--   start     when this redis-server process started, or was promoted from
--             replica to master, in microseconds of the node's clock;
--   until     with the fields below, how long a lock granted in the slot
--   ttl1      may still be held: every grant or extension that the node
--   who       has not seen released ends by until (µs) and has a TTL of
--   until2    at most ttl1 (ms), when it is the grant of token who, or
--   ttl2      ends by until2 (µs) with a TTL of at most ttl2 (ms). A grant
--             longer than a minute that ends after both takes until, ttl1
--             and who, and its release gives until back (until = until2,
--             ttl1 = 0): the effect of a long lock ends once it can no
--             longer be held. Other grants raise until2, with as much
--             again to spare, so that most grants of a TTL in use write
--             nothing, and ttl2 to their TTL;
--   quiet     when the quarantine that the last start imposed ends (µs):
--             the latest end of a grant the marker records, as it held
--             them at the start;
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
-- Every grant with quarantine on pays LASTSAVE and INFO replication; no
-- cheaper evidence rules out what they catch. The replication ID does not
-- rule out a restart: a master restored from an RDB file takes its ID and
-- offset back from it. LASTSAVE does not rule out a promotion: it is
-- whole seconds, and a master and its replica started in the same second
-- with no save since report the same. ROLE is not allowed in scripts,
-- and nothing in the data can tell a promoted replica from its old
-- master: a full resync copies every field, even one written without
-- replication, and the grants a promotion loses are exactly those that
-- left no trace on the replica.
--
-- A node refuses to grant, when the client asks for a quarantine q, while
-- it is younger than max(q, ttl) or its clock is before quiet. The lost
-- grants of a start are those made before it: each ends by the horizon the
-- marker recorded (quiet), or, when the record missed it (a restart
-- without persistence, grants after the last save or the last replicated
-- write), by start + its TTL, which the client's q covers. Grants made
-- after the start are not lost, so they do not hold the node back.
--
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

-- FORMAT is the version of the data this script keeps on the node, in the
-- marker's field v. A node serves clients of one format: a script refuses,
-- with a FORMAT error, to mix its data with another's. Clients before
-- format 1 kept their marker at "redlock:node:{T}"; a format 1 marker,
-- when it is written, leaves a string there, on which their scripts fail
-- with WRONGTYPE, and refuses to start beside one of theirs.
local FORMAT = ${FORMAT}

-- READERS is what a lock key holds while readers hold it (see
-- rw_read.lua): no token has this form, so no lock or writer is granted.
local READERS = ${READERS}

-- marker returns the record of the marker at key, as a table, writing the
-- marker first if it is missing or may be out of date. With promotions
-- false, a caller that will not use the start (a client without
-- quarantine) saves the INFO call that a promotion needs: the next caller
-- that asks sees the promotion.
--
-- On the common path, a marker up to date, the replication ID is only
-- looked for in the INFO text; it is parsed only to write a marker.
local function marker(key, now, promotions)
	local m = redis.call('HMGET', key, 'start', 'quiet', 'until', 'who', 'until2', 'ttl2', 'lastsave', 'replid', 'v', 'fence', 'ttl1')
	if m[9] ~= FORMAT and (m[9] or m[1]) then
		error({err = 'FORMAT redlock: this node holds redlock data of format ' .. tostring(m[9]) ..
			', and this client keeps format ' .. FORMAT .. '; clients of two formats cannot share nodes'})
	end
	local st = {key = key, start = tonumber(m[1]), quiet = tonumber(m[2]) or 0,
		hi = tonumber(m[3]) or 0, who = m[4] or '', hi2 = tonumber(m[5]) or 0, ttl2 = tonumber(m[6]) or 0,
		fence = tonumber(m[10]) or 0, ttl1 = tonumber(m[11]) or 0}
	local lastsave = redis.pcall('LASTSAVE')
	if type(lastsave) ~= 'number' then
		lastsave = 0 -- a server without LASTSAVE: rely on a missing marker
	end
	local repl
	if st.start and tonumber(m[7]) == lastsave and m[8] then
		if not promotions then
			return st
		end
		repl = info('replication')
		if (m[8] == '' and repl == '') or string.find(repl, 'master_replid:' .. m[8] .. '\r', 1, true) then
			return st
		end
	end
	repl = repl or info('replication')
	local replid = string.match(repl, 'master_replid:(%w+)') or ''
	-- The parentheses make a failed match one nil, which tonumber takes,
	-- in every Lua (the in-process server's match returns no value).
	local promoted = (tonumber((string.match(repl, 'second_repl_offset:(%-?%d+)'))) or -1) ~= -1
	local start = st.start
	if promoted and (not start or (m[8] and m[8] ~= replid)) then
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
	-- A start that moved (more than the two seconds that the reading of
	-- the same process's uptime may move it by) is a restart or a
	-- promotion: the grants the marker records may be lost, and the node
	-- sits out until they could have ended.
	if st.start and start > st.start + 2000000 then
		st.quiet = math.max(st.quiet, st.hi, math.min(st.hi2, start + st.ttl2 * 1000))
	end
	if not m[9] then
		-- A new marker: no client before format 1 may keep data here.
		local legacy = ${LEGACY} .. string.sub(key, #${MARKER} + 1)
		-- HGET, which the least-privilege ACL allows: an earlier marker is
		-- a hash with a start; format 1 leaves a string (WRONGTYPE).
		if type(redis.pcall('HGET', legacy, 'start')) == 'string' then
			error({err = 'FORMAT redlock: this node holds the data of a redlock client older than format 1 (' ..
				legacy .. '); clients of two formats cannot share nodes: upgrade every client, then delete the old keys'})
		end
		redis.call('SET', legacy, 'redlock format ' .. FORMAT)
	end
	st.start = start
	redis.call('HSET', key, 'start', string.format('%d', start), 'quiet', string.format('%d', st.quiet),
		'lastsave', lastsave, 'replid', replid, 'v', FORMAT)
	return st
end

-- standing returns, from the record st at now (µs), the node's age in the
-- slot (ms), how long a lock granted in the slot may still be held (ms),
-- and how long the node must still wait before it grants a lock of ttl
-- (ms) to a client that asks for a quarantine (ms; 0 for none): 0 when it
-- may grant.
local function standing(st, now, ttl, quarantine)
	-- After the node's clock has stepped back, start can lie ahead of now.
	local age = math.max(math.floor((now - st.start) / 1000), 0)
	local left = held(st, now)
	local wait = 0
	if quarantine > 0 then
		wait = math.max(math.max(quarantine, ttl) - age, math.ceil((st.quiet - now) / 1000), 0)
	end
	return age, left, wait
end

-- grant returns the fence of a grant to token in the slot of st at now
-- (µs) for ttl (ms): max(counter + 1, node clock in µs), which becomes
-- the slot's counter, written with the grant's horizon. It grows with
-- every grant in the slot, and after the counter is lost (a restart, a
-- flush) it still exceeds every earlier fence as long as the node's clock
-- has not gone back. It is written with %d: tostring would print 1.8e+15.
local function grant(st, token, now, ttl)
	local fence = math.max(st.fence + 1, now)
	st.fence = fence
	hold(st, token, now, ttl)
	put(st, fence)
	return fence
end
