-- counter.lua: how the scripts that end a hold (release.lua,
-- release_all.lua, release_permit.lua, rw_release.lua, to which it is
-- prepended) raise a fence counter.

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
