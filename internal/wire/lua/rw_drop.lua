-- rw_drop.lua: a writer that stops waiting for a read-write lock takes
-- its intent back on one node.
--
-- KEYS[1]  the intents (see rw_write.lua)
-- ARGV[1]  the writer's intent ID
-- ARGV[2]  the lock key, whose channel announces releases
--
-- Returns {status, told}: status 1 when the intent was there and is
-- removed, 0 when it was not; told counts the waiters told. When no live
-- intent is left, waiting readers are woken on the channel of ARGV[2]
-- (see announce.lua).
local status, told = 0, 0
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
	status = 1
	local t = redis.call('TIME')
	local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
	redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))
	if redis.call('ZCARD', KEYS[1]) == 0 then
		told = announce(ARGV[2])
	end
end
return {status, told}
