-- acquire.lua: take the lock on one node. Runs after node.lua.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's fence counter
-- KEYS[3]  the node marker (see node.lua)
-- ARGV[1]  the value of this acquisition round: its token (random, never
--          reused), a space and the owner's label
-- ARGV[2]  the time to live in milliseconds
-- ARGV[3]  the quarantine the client asks for, in milliseconds; 0 for none
-- ARGV[4]  the time to live of the fence counter, in milliseconds
--
-- Returns {status, value, age, left}, where age is how long ago the
-- redis-server process started and left how long a lock granted in the
-- slot may still be held (at least the TTL, for a grant), both in
-- milliseconds, and:
--   { 1, fence, ...}  the key now holds the value; fence is the lock's
--                     fencing token on this node
--   { 0, pttl,  ...}  another value holds the key for pttl more ms (a lock,
--                     a writer, or readers: see rw_read.lua)
--   {-1, wait,  ...}  the node is in quarantine for wait more ms: it
--                     restarted too recently to know which locks it lost
--
-- The grant is a plain SET NX PX. When the key already holds our own value,
-- this is a client library re-sending the command after the first reply
-- was lost; the first SET ran after the round started, so the key lives at
-- least as long as the round assumes, and the retry counts as a grant.
--
-- The fence is max(counter + 1, node clock in µs). It grows with every
-- grant on the node, and after the counter is lost (a restart, a flush, its
-- expiry) it still exceeds every earlier fence as long as the node's clock
-- has not gone back. It is written with %d: tostring would print 1.8e+15.
local now = now_us()
local ttl, quarantine = tonumber(ARGV[2]), tonumber(ARGV[3])
local st = marker(KEYS[3], now, quarantine > 0)
local age, left, wait = standing(st, now, ttl, quarantine)
if wait > 0 then
	return {-1, wait, age, left}
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
	left = hold(st, ARGV[1], now, ttl)
	-- One call writes the clock and reads the old counter. Only when the
	-- counter was not behind the clock (a clock that stepped back, or two
	-- grants within a microsecond) is counter + 1 written over it.
	local fence = now
	local old = tonumber(redis.call('SET', KEYS[2], string.format('%d', now), 'PX', ARGV[4], 'GET'))
	if old and old >= now then
		fence = old + 1
		redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', ARGV[4])
	end
	return {1, fence, age, left}
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return {1, tonumber(redis.call('GET', KEYS[2])) or 0, age, math.max(left, ttl)}
end
return {0, redis.call('PTTL', KEYS[1]), age, left}
