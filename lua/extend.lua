-- extend.lua: push the expiry of our lock on one node further out.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the token of the acquisition being extended
-- ARGV[2]  the new time to live in milliseconds, counted from now
--
-- Returns 1 when the key held the token and got the new time to live, 0 when
-- the key was absent, -1 when another token holds it.
--
-- A missing key is never re-created: once the lock has expired on a node,
-- someone else may have taken and released it there in the meantime.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	return 1
end
if v then
	return -1
end
return 0
