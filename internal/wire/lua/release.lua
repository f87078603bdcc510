-- release.lua: give the lock up on one node, on one key or on several
-- keys, where we still hold it. Runs after counter.lua and announce.lua.
--
-- KEYS[1..n]   the lock keys
-- KEYS[n+1..]  the node markers of their hash slots (see node.lua), each
--              slot once
-- ARGV[1]      the value of the acquisition being released
-- ARGV[2]      the lock's fence (the largest over the nodes that granted
--              it)
-- ARGV[3]      optional, for the clean-up of a failed acquisition, which
--              frees only its own grant and raises no counter: "quiet"
--              announces nothing (a round that failed for want of
--              answers), "undo" announces (a contended round, whose
--              contenders wait on the grant it frees); anything else is
--              a release, which announces and raises the counters
-- ARGV[4]      n, the number of keys; absent for one key
--
-- Returns {status, told}: status 1 when a key held the value (every such
-- key is deleted), else -1 when a key holds another value (it is left
-- alone), else 0 (the keys were absent); told, how many clients were
-- told of the release.
--
-- A deletion is announced on the key's channel (see announce.lua), so
-- that waiters wake at once instead of polling; a user whose ACL does not
-- allow the channel still releases, and its waiters poll.
--
-- On every node, whatever the keys hold, the slots' fence counters are
-- raised to at least the lock's fence (see counter.lua, which says why the
-- deletion comes first); a clean-up raises none. Its round gave no
-- lock, so no holder has its fence for a later one to exceed, and the
-- nodes that granted it wrote their counters then.
local n = tonumber(ARGV[4]) or 1
local cleanup = ARGV[3] == 'quiet' or ARGV[3] == 'undo'
local deleted, foreign, told = 0, 0, 0
for i = 1, n do
	local v = redis.call('GET', KEYS[i])
	if v == ARGV[1] then
		redis.call('DEL', KEYS[i])
		deleted = deleted + 1
		if ARGV[3] ~= 'quiet' then
			told = told + announce(KEYS[i])
		end
	elseif v then
		foreign = foreign + 1
	end
end
for i = n + 1, #KEYS do
	local err = settle(KEYS[i], ARGV[1], not cleanup and ARGV[2] or nil, deleted > 0)
	if err then
		return redis.error_reply(err)
	end
end
if deleted > 0 then
	return {1, told}
elseif foreign > 0 then
	return {-1, told}
end
return {0, told}
