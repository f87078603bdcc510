-- acquire_permit.lua: take one permit of a semaphore on one node: a lock
-- on the first free one of its n slots. Runs after node.lua.
--
-- KEYS[1..n]     the slots' lock keys, slot 0 first
-- KEYS[n+1]      the node marker of the semaphore's hash slot
-- KEYS[n+2]      the semaphore's size record: n, while a permit is held
-- ARGV[1..3]     as acquire.lua: value, TTL, quarantine
-- ARGV[4]        n
-- ARGV[5]        the slot to look at first, from 0 to n-1; the others
--                follow in order, wrapping around
--
-- Returns what acquire.lua returns, with the slot as a fifth element:
--   { 1, fence, age, maxttl, slot}  the slot's key now holds the token
--   { 0, pttl,  age, maxttl, -1}    every slot is held by another token;
--                                   pttl is the shortest time one of them
--                                   has left
--   {-1, wait,  age, maxttl, -1}    the node is in quarantine
-- and an error reply "INVALID redlock: semaphore size <held> held, <n>
-- asked" when the node holds permits of a semaphore of another size on
-- the key.
--
-- The size record lives at least as long as any permit it granted: each
-- grant and extension of a permit keeps it that long (PEXPIRE GT), and the
-- release that frees the last slot deletes it. While it lives, a round of
-- another n is refused: two sizes on one key would overfill the smaller.
--
-- A slot is a lock like any other: acquire.lua's SET NX PX on its key,
-- with the fence counter of its hash slot, so that a permit is extended and released
-- as a lock on its slot's key is. Every client looks at the slots in the
-- order its round asks for, so the nodes of one round, whose slots are
-- alike unless clients contend, grant the same slot.
local n, first = tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_us()
local ttl, quarantine = tonumber(ARGV[2]), tonumber(ARGV[3])
local st = marker(KEYS[n + 1], now, quarantine > 0)
local age, maxttl, wait = standing(st, now, ttl, quarantine)
if wait > 0 then
	return {-1, wait, age, maxttl, -1}
end
local size = KEYS[n + 2]
local sized = tonumber(redis.call('GET', size))
if sized and sized ~= n then
	return redis.error_reply(string.format('INVALID redlock: semaphore size %d held, %d asked', sized, n))
end
local shortest
for j = 0, n - 1 do
	local slot = (first + j) % n
	local key = KEYS[slot + 1]
	local v = redis.call('GET', key)
	if v == ARGV[1] then
		-- A client library re-sending the call after the first reply was
		-- lost finds its own grant, as in acquire.lua.
		return {1, st.fence, age, math.max(maxttl, ttl), slot}
	end
	if not v then
		redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
		if sized then
			redis.call('PEXPIRE', size, ARGV[2], 'GT')
		else
			redis.call('SET', size, n, 'PX', ARGV[2])
		end
		local fence = grant(st, ARGV[1], now, ttl)
		return {1, fence, age, held(st, now), slot}
	end
	local pttl = redis.call('PTTL', key)
	if not shortest or pttl < shortest then
		shortest = pttl
	end
end
return {0, shortest, age, maxttl, -1}
