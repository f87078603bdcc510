-- extend.lua: push the expiry of our lock on one node further out.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the node marker (see node.lua)
-- KEYS[3]  a semaphore's size record, for a permit (see acquire_permit.lua)
-- ARGV[1]  the value of the acquisition being extended
-- ARGV[2]  the new time to live in milliseconds, counted from now
--
-- Returns 1 when the key held the token and got the new time to live, 0 when
-- the key was absent, -1 when another token holds it.
--
-- A missing key is never re-created: once the lock has expired on a node,
-- someone else may have taken and released it there in the meantime. The
-- new end is recorded in the marker, so that quarantine covers it. Runs
-- after node.lua.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	if KEYS[3] then
		redis.call('PEXPIRE', KEYS[3], ARGV[2], 'GT')
	end
	local st = record(KEYS[2])
	hold(st, ARGV[1], now_us(), tonumber(ARGV[2]))
	put(st)
	return 1
end
if v then
	return -1
end
return 0
