-- elect.lua: a candidate that has just taken the election's lock makes
-- its leadership known on one node. Runs after holder.lua.
--
-- KEYS[1]  the election's lock key
-- KEYS[2]  the election's term record
-- ARGV[1]  the token of the leader's acquisition
-- ARGV[2]  the leader's term: the lock's fence
-- ARGV[3]  the time to live of the record, in milliseconds
--
-- Returns 1 when the key holds the token and the record now names it and
-- its term, 0 when the key is absent, -1 when another token holds it.
-- The record is "<id> <term>", id as holder gives it; a reader trusts it
-- only while the lock key holds a token of that id, so an old leader's
-- record says nothing once the lock has changed hands. The new leader is
-- announced on "redlock:leader:" .. KEYS[1], where observers listen.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
	local id = holder(v)
	redis.call('SET', KEYS[2], id .. ' ' .. ARGV[2], 'PX', ARGV[3])
	redis.pcall('PUBLISH', ${LEADER} .. KEYS[1], '')
	return 1
end
if v then
	return -1
end
return 0
