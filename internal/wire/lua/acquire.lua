-- acquire.lua: take the lock on one node. Runs after node.lua.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the node marker of its slot (see node.lua), which holds the
--          slot's fence counter
-- ARGV[1]  the value of this acquisition round: its token (random, never
--          reused), a space and the owner's label
-- ARGV[2]  the time to live in milliseconds
-- ARGV[3]  the quarantine the client asks for, in milliseconds; 0 for none
--
-- Returns {status, value, age, left}, where age is how long ago the
-- redis-server process started and left how long a lock granted in the
-- slot may still be held (at least the TTL, for a grant), both in
-- milliseconds, and:
--   { 1, fence, ...}  the key now holds the value; fence is the lock's
--                     fencing token on this node (see grant in node.lua)
--   { 0, pttl,  ...}  another value holds the key for pttl more ms (a lock,
--                     a writer, or readers: see rw_read.lua)
--   {-1, wait,  ...}  the node is in quarantine for wait more ms: it
--                     restarted too recently to know which locks it lost
--
-- The grant is a plain SET NX PX. When the key already holds our own value,
-- this is a client library re-sending the command after the first reply
-- was lost; the first SET ran after the round started, so the key lives at
-- least as long as the round assumes, and the retry counts as a grant,
-- with the slot's counter, which is at least its fence, as its fence.
local now = now_us()
local ttl, quarantine = tonumber(ARGV[2]), tonumber(ARGV[3])
local st = marker(KEYS[2], now, quarantine > 0)
local age, left, wait = standing(st, now, ttl, quarantine)
if wait > 0 then
	return {-1, wait, age, left}
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
	local fence = grant(st, ARGV[1], now, ttl)
	return {1, fence, age, held(st, now)}
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return {1, st.fence, age, math.max(left, ttl)}
end
return {0, redis.call('PTTL', KEYS[1]), age, left}
