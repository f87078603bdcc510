-- extend.lua: push the expiry of our lock on one node further out.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the node marker (see node.lua)
-- ARGV[1]  the token of the acquisition being extended
-- ARGV[2]  the new time to live in milliseconds, counted from now
--
-- Returns 1 when the key held the token and got the new time to live, 0 when
-- the key was absent, -1 when another token holds it.
--
-- A missing key is never re-created: once the lock has expired on a node,
-- someone else may have taken and released it there in the meantime. A
-- longer TTL than any seen before is recorded in the marker, if there is
-- one, so that quarantine covers it.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	local maxttl = tonumber(redis.call('HGET', KEYS[2], 'maxttl'))
	if maxttl and tonumber(ARGV[2]) > maxttl then
		redis.call('HSET', KEYS[2], 'maxttl', ARGV[2])
	end
	return 1
end
if v then
	return -1
end
return 0
