-- adopt.lua: what one node holds for a token on a key, for a process
-- that takes over the token's hold; where the token holds, the slot's
-- fence counter is raised above the hold's fence, and nothing else
-- changes.
--
-- KEYS[1]          the lock key (a lock's, or an RW lock's writer)
-- KEYS[2]          the RW lock's readers (see rw_read.lua)
-- KEYS[3]          the node marker of its slot (see node.lua), with the
--                  slot's fence counter
-- KEYS[4..3+n]     the slots of a semaphore on the key (slot 0 first)
-- ARGV[1]          the token (without the owner label)
-- ARGV[2]          n
-- ARGV[3]          the fence of the hold, as its holder's Lock.Fence
--                  gave it (the hand-over carries it)
--
-- A value is the token, a space and the owner's label: the token holds
-- where a value starts with it and a space.
--
-- Returns {status, kind, slot, left, fence, value}:
--   { 1, kind, slot, left, fence, value}  the token holds here: kind 0 as
--        the key's holder (a lock, or a writer), 1 as a live reader, 2 as
--        the permit of slot; left is the time it has left, in ms; fence
--        the slot's counter, raised to at least the hold's fence + 1, the
--        adopter's fence; value the value that holds
--   {-1, 0, 0, left, 0}  the token does not hold, but another token does:
--        the key, a live reader or some slot; left is the time the key's
--        holder, the latest reader, or the first held slot has left
--   { 0, 0, 0, 0, 0}     nothing holds
local tok, n, held = ARGV[1] .. ' ', tonumber(ARGV[2]), tonumber(ARGV[3])
local function ours(v)
	return v and string.sub(v, 1, #tok) == tok
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- counter raises the slot's counter, where the token holds, to the
-- adopter's fence, the hold's + 1: the next owner of the key, whose grant
-- draws above the counter of a node of this quorum, gets a greater one.
-- The hold's fence comes with the hand-over, not from the nodes: the node
-- that gave it may not answer, and the others' counters may be below it.
-- On a node out of memory (noeviction) the write is refused, and the
-- counter is returned as read.
local function counter()
	local c = tonumber(redis.call('HGET', KEYS[3], 'fence')) or 0
	local f = math.max(c, held + 1)
	if f > c then
		local r = redis.pcall('HSET', KEYS[3], 'fence', string.format('%d', f))
		if type(r) == 'table' and r.err then
			return c
		end
	end
	return f
end
local v = redis.call('GET', KEYS[1])
if ours(v) then
	return {1, 0, 0, math.max(redis.call('PTTL', KEYS[1]), 0), counter(), v}
end
local live = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. string.format('%d', now), '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
	if ours(live[i]) then
		return {1, 1, 0, math.floor((tonumber(live[i + 1]) - now) / 1000), counter(), live[i]}
	end
end
local slots = {}
if n > 0 then
	slots = redis.call('MGET', unpack(KEYS, 4, 3 + n))
end
for i = 1, n do
	if ours(slots[i]) then
		return {1, 2, i - 1, math.max(redis.call('PTTL', KEYS[3 + i]), 0), counter(), slots[i]}
	end
end
if v and v ~= ${READERS} then
	return {-1, 0, 0, math.max(redis.call('PTTL', KEYS[1]), 0), 0}
end
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if last[2] and tonumber(last[2]) > now then
	return {-1, 0, 0, math.floor((tonumber(last[2]) - now) / 1000), 0}
end
for i = 1, n do
	if slots[i] then
		return {-1, 0, 0, math.max(redis.call('PTTL', KEYS[3 + i]), 0), 0}
	end
end
return {0, 0, 0, 0, 0}
