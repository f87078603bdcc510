-- release.lua: give the lock up on one node, if we still hold it there.
-- Runs after counter.lua.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the node marker of its slot (see node.lua)
-- ARGV[1]  the value of the acquisition being released
-- ARGV[2]  the lock's fence (the largest over the nodes that granted it)
-- ARGV[3]  optional: "quiet" announces nothing (the clean-up of a failed
--          acquisition frees only its own grant, which nobody waits for)
--
-- Returns 1 when the key held the value and was deleted, 0 when the key was
-- absent, -1 when another value holds it (it is left alone); and, as a
-- second element, how many clients were told of the release.
--
-- A deletion is published on "redlock:released:" .. KEYS[1], so that
-- waiters wake at once instead of polling. The publication is best
-- effort: a user whose ACL does not allow the channel still releases (the
-- deletion has happened by then and a script is not rolled back), and its
-- waiters poll.
--
-- On every node, whatever the key holds, the slot's fence counter is
-- raised to at least the lock's fence (see counter.lua, which says why the
-- deletion comes first).
local v = redis.call('GET', KEYS[1])
local status, told = 0, 0
if v == ARGV[1] then
	redis.call('DEL', KEYS[1])
	status = 1
	if ARGV[3] ~= 'quiet' then
		told = redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[1], '')
		if type(told) ~= 'number' then
			told = 0
		end
	end
elseif v then
	status = -1
end
local err = settle(KEYS[2], ARGV[1], ARGV[2], status == 1)
if err then
	return redis.error_reply(err)
end
return {status, told}
