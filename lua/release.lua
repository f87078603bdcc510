-- release.lua: give the lock up on one node, if we still hold it there.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the token of the acquisition being released
--
-- Returns 1 when the key held the token and was deleted, 0 when the key was
-- absent, -1 when another token holds it (it is left alone).
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
	redis.call('DEL', KEYS[1])
	return 1
end
if v then
	return -1
end
return 0
