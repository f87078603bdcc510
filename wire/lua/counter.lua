-- counter.lua: how the scripts that end a hold (release.lua,
-- release_all.lua, release_permit.lua, rw_release.lua, to which it is
-- prepended) raise a fence counter and give back the horizon of a long
-- grant (see node.lua).

-- raise lifts the fence counter at key to at least fence, a decimal
-- string, keeping it ttl milliseconds, so that the next owner's fence
-- exceeds fence even on a node whose own counter was behind. It returns
-- nil, or the message of an error that the caller returns as its reply.
--
-- A node at its maxmemory with the noeviction policy refuses a script's
-- first write if that write may use memory (OOM). So the scripts delete
-- first: DEL frees memory and is always allowed, and once a script has
-- written, Redis lets the rest of it write too. When there was nothing to
-- delete, such a node keeps its counter as it is, like a node that the
-- release did not reach; it cannot grant the lock until it can write
-- again. Any other error of the counter's write is returned.
local function raise(key, fence, ttl)
	local c = tonumber(redis.call('GET', key))
	if c and c >= tonumber(fence) then
		return nil
	end
	local r = redis.pcall('SET', key, fence, 'PX', ttl)
	if type(r) == 'table' and r.err and not string.find(r.err, '^%-?OOM') then
		return r.err
	end
	return nil
end

-- unhold records in the marker at key that token's grants in its slot
-- have ended: if token set the marker's until, until falls back to until2.
-- It writes nothing otherwise, and nothing on a node at its maxmemory
-- (see counter.lua).
local function unhold(key, token)
	if redis.call('HGET', key, 'who') == token then
		redis.pcall('HSET', key, 'who', '', 'until', redis.call('HGET', key, 'until2') or '0')
	end
end

-- READERS is what a lock key holds while readers hold it (see node.lua).
local READERS = '=readers'
