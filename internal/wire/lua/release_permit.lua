-- release_permit.lua: give a semaphore's permit back on one node, or
-- clean up after a round that failed to get one.
--
-- KEYS[1..n]     the slots' lock keys, slot 0 first
-- KEYS[n+1]      the semaphore's size record (see acquire_permit.lua)
-- KEYS[n+2]      the node marker of the semaphore's hash slot
-- ARGV[1..2]     as release.lua: value, the permit's fence
-- ARGV[3]        n
-- ARGV[4]        the permit's slot; -1 to clean up after a failed round
-- ARGV[5]        the semaphore's key, whose channel announces releases
--
-- Returns {status, told, free}: status and told as release.lua returns
-- them, for the permit's slot: 1 when its key held the token and was
-- deleted, 0 when it was absent, -1 when another token holds it (in a
-- clean-up, status is 1 when some slot held the token, else 0); free is
-- the number of slots held by no one once the token's are deleted, which
-- tells the client whether the semaphore was full.
--
-- A node that granted this round another slot than the one a quorum
-- agreed on holds that slot for the token too; every slot is looked at,
-- and each that holds the token is deleted, so that no such grant outlives
-- the permit. Every deletion is announced on the channel of ARGV[5],
-- the semaphore (see announce.lua), where its waiters listen, and
-- the slot's counter is raised to the fence, whatever the slots hold. As in release.lua, deletions come before writes, so
-- that a node out of memory still frees its slots.
local n, own = tonumber(ARGV[3]), tonumber(ARGV[4])
local status, told, free = 0, 0, 0
for slot = 0, n - 1 do
	local v = redis.call('GET', KEYS[slot + 1])
	if not v or v == ARGV[1] then
		free = free + 1
	end
	if v == ARGV[1] then
		redis.call('DEL', KEYS[slot + 1])
		if slot == own or own < 0 then
			status = 1
		end
		told = told + announce(ARGV[5])
	elseif v and slot == own then
		status = -1
	end
end
if free == n and tonumber(redis.call('GET', KEYS[n + 1])) == n then
	redis.call('DEL', KEYS[n + 1])
end
local err = settle(KEYS[n + 2], ARGV[1], ARGV[2], true)
if err then
	return redis.error_reply(err)
end
return {status, told, free}
