-- rw_admit.lua: what rw_read.lua and rw_write.lua start with, after
-- node.lua, with their KEYS and ARGV: the node's standing in the slot
-- (a node in quarantine refuses, as in acquire.lua), and the readers and
-- writers' intents whose expiry has passed dropped. It defines now, ttl,
-- quarantine, st, age and maxttl, and nows, the clock as a decimal
-- string.
local now = now_us()
local ttl, quarantine = tonumber(ARGV[2]), tonumber(ARGV[3])
local st = marker(KEYS[4], now, quarantine > 0)
local age, maxttl, wait = standing(st, now, ttl, quarantine)
if wait > 0 then
	return {-1, wait, age, maxttl}
end
local nows = string.format('%d', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', nows)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', nows)
