-- force.lua: delete a lock on one node whatever token holds it, for an
-- operator who has decided that its owner is gone. Runs after holder.lua
-- and announce.lua.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the node marker of its slot (see node.lua), with the slot's
--          fence counter
-- ARGV[1]  the fence floor: the largest fence counter the operator's
--          client read on any node
-- ARGV[2]  the key whose waiters the removal wakes: the lock key, or the
--          key of the semaphore whose slot KEYS[1] is; KEYS[1] if absent
-- KEYS[3]  optional: the readers of a read-write lock on the key
-- KEYS[4]  optional: the intents of its waiting writers
--
-- Returns {removed, id, owner, pttl, told}: removed is 1 when the key held
-- a lock and was deleted, with id and owner as holder gives them, pttl the
-- time it had left and told the number of waiters told of the release.
-- With KEYS[3] and KEYS[4], a sixth element follows: the number of live
-- readers removed. The readers and the intents are removed, under the
-- same rule as the key: not when the counter exceeds the floor, which a
-- reader granted since the floor was read has raised (see rw_read.lua).
--
-- Like release.lua, it deletes first (a full node still allows DEL) and
-- raises the fence counter to the floor, so that the next owner's fence
-- exceeds the removed owner's on every node, and fence-checking resources
-- refuse the removed owner's late writes.
--
-- A key whose grant came after the counter was raised to the floor is
-- left alone: its fence, and so the counter, exceeds the floor. That is a
-- newer owner, which obtained the lock after this removal had passed the
-- node; were the removal sent again (a client library retries a request
-- whose answer it lost), deleting its key would take the lock from under
-- it. Such a key is reported as not removed. Every key granted before the
-- operator read the counters has a fence no greater than the floor, and is
-- removed.
local v = redis.call('GET', KEYS[1])
local c = tonumber(redis.call('HGET', KEYS[2], 'fence'))
local floor = tonumber(ARGV[1])
local removed, id, owner, pttl, told = 0, '', '', 0, 0
if v == READERS then
	-- The readers keep the key: it goes with them, and only with them.
	if KEYS[4] and not (c and c > floor) then
		redis.call('DEL', KEYS[1])
	end
elseif v and not (c and c > floor) then
	pttl = redis.call('PTTL', KEYS[1])
	redis.call('DEL', KEYS[1])
	removed = 1
	id, owner = holder(v)
	told = announce(ARGV[2] or KEYS[1])
end
local readers = 0
if KEYS[4] and not (c and c > floor) then
	local t = redis.call('TIME')
	local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
	-- pcall: a user whose ACL allows no sorted-set command (one that
	-- predates read-write locks) still removes locks, and DEL removes the
	-- readers all the same.
	readers = redis.pcall('ZCOUNT', KEYS[3], '(' .. string.format('%d', now), '+inf')
	if type(readers) ~= 'number' then
		readers = 0
	end
	redis.call('DEL', KEYS[3], KEYS[4])
	if readers > 0 and removed == 0 then
		told = announce(ARGV[2] or KEYS[1])
	end
end
if not c or c < floor then
	local r = redis.pcall('HSET', KEYS[2], 'fence', ARGV[1])
	if type(r) == 'table' and r.err and not string.find(r.err, '^%-?OOM') then
		return redis.error_reply(r.err)
	end
end
if KEYS[4] then
	return {removed, id, owner, pttl, told, readers}
end
return {removed, id, owner, pttl, told}
