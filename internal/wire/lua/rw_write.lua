-- rw_write.lua: take the writer's hold of a read-write lock on one node,
-- or record the writer's intent while readers hold. Runs after node.lua
-- and rw_admit.lua.
--
-- KEYS[1..4]  as rw_read.lua: the lock key, the readers, the intents and
--             the node marker
-- ARGV[1..3]  as acquire.lua: value, TTL (ms), quarantine (ms)
-- ARGV[4]     the writer's intent ID: one for all the rounds of one wait,
--             where each round has a token of its own
-- ARGV[5]     how long the intent lives, in milliseconds
--
-- Returns what acquire.lua returns: {1, fence, age, maxttl} when the key
-- now holds the token; {0, wait, age, maxttl} when another token holds the
-- key (wait: its pttl) or live readers hold (wait: the longest time one of
-- them has left); {-1, wait, age, maxttl} in quarantine.
--
-- The writer's hold is the mutex's: the key holds the token, PX ttl,
-- granted as acquire.lua grants it, and only when no reader is live. So a
-- writer and a plain lock on the key exclude each other, and a writer is
-- extended and released as a lock is. A writer that is refused records,
-- or renews, its intent, which keeps new readers out (see rw_read.lua)
-- until it is granted, gives up (rw_drop.lua) or the intent expires. A
-- writer that is granted drops its intent.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
	-- A retry finds its own grant, as in acquire.lua.
	return {1, st.fence, age, math.max(maxttl, ttl)}
end
wait = nil
if v and v ~= READERS then
	wait = math.max(redis.call('PTTL', KEYS[1]), 0)
else
	local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
	if last[2] then
		wait = math.ceil((tonumber(last[2]) - now) / 1000)
	end
end
if wait then
	local expiry = now + tonumber(ARGV[5]) * 1000
	redis.call('ZADD', KEYS[3], string.format('%d', expiry), ARGV[4])
	local latest = tonumber(redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')[2])
	redis.call('PEXPIRE', KEYS[3], math.ceil((latest - now) / 1000))
	return {0, wait, age, maxttl}
end
-- The key is free, or holds READERS after its last reader's expiry.
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if redis.call('ZREM', KEYS[3], ARGV[4]) == 1 and redis.call('ZCARD', KEYS[3]) == 0 then
	redis.call('DEL', KEYS[3])
end
-- The fence, as in acquire.lua: max(counter + 1, node clock in µs).
local fence = grant(st, ARGV[1], now, ttl)
return {1, fence, age, held(st, now)}
