-- rw_extend.lua: push a reader's expiry further out on one node.
--
-- KEYS[1]  the readers (see rw_read.lua)
-- KEYS[2]  the node marker (see node.lua)
-- KEYS[3]  the lock key, which holds READERS while readers hold; it lives
--          as long as the latest reader
-- ARGV[1]  the value of the reader being extended
-- ARGV[2]  the new time to live in milliseconds, counted from now
--
-- Returns 1 when the token was a live reader and got the new time to
-- live, 0 when it was not (it is never re-added: see extend.lua). Only
-- this reader's expiry changes; the set's own expiry follows its latest
-- member again.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not score or score <= now then
	return 0
end
redis.call('ZADD', KEYS[1], 'XX', string.format('%d', now + tonumber(ARGV[2]) * 1000), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))
local last = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
local keep = math.ceil((last - now) / 1000)
redis.call('PEXPIRE', KEYS[1], keep)
if redis.call('GET', KEYS[3]) == READERS then
	redis.call('PEXPIRE', KEYS[3], keep)
end
local st = record(KEYS[2])
hold(st, ARGV[1], now, tonumber(ARGV[2]))
put(st)
return 1
