-- rw_read.lua: take a reader's share of a read-write lock on one node.
-- Runs after node.lua.
--
-- KEYS[1]  the lock key, which holds the writer's value while one holds,
--          and READERS (see node.lua) while readers hold, so that no lock
--          and no writer is granted beside them
-- KEYS[2]  the readers: a sorted set of token -> expiry (µs, node clock)
-- KEYS[3]  the intents of waiting writers: id -> expiry (µs, node clock)
-- KEYS[4]  the lock's fence counter
-- KEYS[5]  the node marker (see node.lua)
-- ARGV[1..4]  as acquire.lua: token, TTL (ms), quarantine (ms), fence
--             counter TTL (ms)
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
-- A reader's fence is the key's floor: max(counter, node clock in µs),
-- which is written back to the counter, so that the next writer's fence
-- (counter + 1 at least) exceeds every reader's granted here.
local now = now_us()
local ttl, quarantine = tonumber(ARGV[2]), tonumber(ARGV[3])
local st = marker(KEYS[5], now, quarantine > 0)
local age, maxttl, wait = standing(st, now, ttl, quarantine)
if wait > 0 then
	return {-1, wait, age, maxttl}
end
local nows = string.format('%d', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', nows)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', nows)
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
	-- A client library re-sending the call after the first reply was lost
	-- finds its own grant, as in acquire.lua.
	return {1, tonumber(redis.call('GET', KEYS[4])) or 0, age, math.max(maxttl, ttl)}
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
maxttl = hold(st, ARGV[1], now, ttl)
local fence = now
local old = tonumber(redis.call('GET', KEYS[4]))
if old and old >= now then
	fence = old
else
	redis.call('SET', KEYS[4], nows, 'PX', ARGV[4])
end
return {1, fence, age, maxttl}
