-- rw_read.lua: take a reader's share of a read-write lock on one node.
-- Runs after node.lua and rw_admit.lua.
--
-- KEYS[1]  the lock key, which holds the writer's value while one holds,
--          and READERS (see node.lua) while readers hold, so that no lock
--          and no writer is granted beside them
-- KEYS[2]  the readers: a sorted set of token -> expiry (µs, node clock)
-- KEYS[3]  the intents of waiting writers: id -> expiry (µs, node clock)
-- KEYS[4]  the node marker of its slot (see node.lua), with the fence
--          counter
-- ARGV[1..3]  as acquire.lua: value, TTL (ms), quarantine (ms)
--
-- Returns what acquire.lua returns: {1, fence, age, maxttl} when the token
-- is now a reader here; {0, wait, age, maxttl} when a writer holds the key
-- (wait: its pttl) or a waiting writer's intent is live (wait: the time
-- the intent has left); {-1, wait, age, maxttl} in quarantine.
--
-- Readers and intents whose expiry has passed are dropped first, so a
-- reader that crashed frees its share at its own expiry, whatever the
-- others do. The set's own expiry follows its latest member, so that it
-- never outlives its readers.
--
-- A reader's fence is the slot's floor: max(counter, node clock in µs),
-- which is written back to the counter, so that the next writer's fence
-- (counter + 1 at least) exceeds every reader's granted here.
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
	-- A client library re-sending the call after the first reply was lost
	-- finds its own grant, as in acquire.lua.
	return {1, st.fence, age, math.max(maxttl, ttl)}
end
local v = redis.call('GET', KEYS[1])
if v and v ~= READERS then
	return {0, math.max(redis.call('PTTL', KEYS[1]), 0), age, maxttl}
end
local intent = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
if intent[2] then
	return {0, math.ceil((tonumber(intent[2]) - now) / 1000), age, maxttl}
end
local expiry = now + ttl * 1000
redis.call('ZADD', KEYS[2], string.format('%d', expiry), ARGV[1])
local last = tonumber(redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2])
local keep = math.ceil((last - now) / 1000)
redis.call('PEXPIRE', KEYS[2], keep)
redis.call('SET', KEYS[1], READERS, 'PX', keep)
hold(st, ARGV[1], now, ttl)
local fence = st.fence
if fence < now then
	fence = now
	put(st, fence)
else
	put(st)
end
return {1, fence, age, held(st, now)}
