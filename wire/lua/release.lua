-- release.lua: give the lock up on one node, if we still hold it there.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's fence counter
-- KEYS[3]  the node marker (see node.lua)
-- ARGV[1]  the value of the acquisition being released
-- ARGV[2]  the lock's fence (the largest over the nodes that granted it)
-- ARGV[3]  the time to live of the fence counter, in milliseconds
--
-- Returns 1 when the key held the token and was deleted, 0 when the key was
-- absent, -1 when another token holds it (it is left alone); and, as a
-- second element, how many clients were told of the release.
--
-- A deletion is published on "redlock:released:" .. KEYS[1], so that
-- waiters wake at once instead of polling. The publication is best
-- effort: a user whose ACL does not allow the channel still releases (the
-- deletion has happened by then and a script is not rolled back), and its
-- waiters poll.
--
-- On every node, whatever the key holds, the fence counter is raised to at
-- least the lock's fence (see counter.lua, which runs before this and says
-- why the deletion comes first).
local v = redis.call('GET', KEYS[1])
local status, told = 0, 0
if v == ARGV[1] then
	redis.call('DEL', KEYS[1])
	status = 1
	told = redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[1], '')
	if type(told) ~= 'number' then
		told = 0
	end
	unhold(KEYS[3], ARGV[1])
elseif v then
	status = -1
end
local err = raise(KEYS[2], ARGV[2], ARGV[3])
if err then
	return redis.error_reply(err)
end
return {status, told}
