-- counter.lua: how the scripts that end a hold (release.lua,
-- release_permit.lua, rw_release.lua, to which it is prepended) raise the fence counter of a slot and give back the horizon
-- of a long grant (see node.lua).

-- READERS is what a lock key holds while readers hold it (see node.lua).
local READERS = ${READERS}

-- settle lifts the fence counter in the marker at key to at least fence,
-- a decimal string, so that the next owner's fence exceeds fence even on
-- a node whose own counter was behind; and, if freed, gives back the
-- marker's horizon when token set it (see hold in horizon.lua). With
-- fence nil it only gives back. It writes nothing when the counter
-- already covers fence and token set nothing: one read, for most
-- releases. It returns nil, or the message of an error that the caller
-- returns as its reply.
--
-- A node at its maxmemory with the noeviction policy refuses a script's
-- first write if that write may use memory (OOM). So the scripts delete
-- first: DEL frees memory and is always allowed, and once a script has
-- written, Redis lets the rest of it write too. When there was nothing to
-- delete, such a node keeps its counter as it is, like a node that the
-- release did not reach; it cannot grant the lock until it can write
-- again. Any other error of the write is returned.
--
-- A release that freed nothing gives no horizon back, so it reads the
-- counter alone. A counter equal to fence, as on the node that gave the
-- lock its fence, is compared as a string, without numbers.
local function settle(key, token, fence, freed)
	if not (fence or freed) then
		return nil
	end
	local c, who
	if not freed then
		c = redis.call('HGET', key, 'fence')
	elseif fence then
		local m = redis.call('HMGET', key, 'fence', 'who')
		c, who = m[1], m[2]
	else
		who = redis.call('HGET', key, 'who')
	end
	local raise = fence and c ~= fence and not ((tonumber(c) or -1) >= tonumber(fence))
	local back = freed and who == token
	if not (raise or back) then
		return nil
	end
	local a = {}
	if raise then
		a[1], a[2] = 'fence', fence
	end
	if back then
		a[#a + 1], a[#a + 2] = 'who', ''
		a[#a + 1], a[#a + 2] = 'until', redis.call('HGET', key, 'until2') or '0'
		a[#a + 1], a[#a + 2] = 'ttl1', '0'
	end
	local r = redis.pcall('HSET', key, unpack(a))
	if type(r) == 'table' and r.err and not string.find(r.err, '^%-?OOM') then
		return r.err
	end
	return nil
end
