-- inspect.lua: what one node holds for a lock, read without writing
-- anything. Runs after holder.lua.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the node marker of the key's slot (see node.lua), with the
--          slot's fence counter
-- KEYS[3]  optional: the readers of a read-write lock on the key (see
--          rw_read.lua)
-- KEYS[4]  optional: the intents of its waiting writers (see rw_write.lua)
--
-- Returns {held, id, owner, pttl, fence, age, left, clock}: held is 1 when
-- the key holds a lock or a writer (not READERS: see rw_read.lua), with id and owner as holder gives them and pttl its
-- remaining time to live in milliseconds (-1 for a key without expiry,
-- which a lock never is); fence is the slot's fence counter (0 if none); age is
-- how long ago the marker's start lies, -1 without a marker, and left how
-- long a lock granted in the slot may still be held, both in milliseconds; clock is the
-- node's clock in microseconds since 1970, from which the node draws its
-- fences when its counter is behind (see acquire.lua).
--
-- With KEYS[3] and KEYS[4], two more elements follow: the live readers as
-- a flat array {id, owner, pttl, id, owner, pttl, ...}, latest expiry
-- last, and the number of live intents. Neither shows a token.
local held, id, owner, pttl = 0, '', '', 0
local v = redis.call('GET', KEYS[1])
if v and v ~= READERS then
	held, pttl = 1, redis.call('PTTL', KEYS[1])
	id, owner = holder(v)
end
local m = redis.call('HMGET', KEYS[2], 'start', 'until', 'until2', 'ttl2', 'fence', 'ttl1')
local fence = tonumber(m[5]) or 0
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local age = -1
if m[1] then
	age = math.max(math.floor((now - tonumber(m[1])) / 1000), 0)
end
-- left is the longest TTL of a grant that may still be held, as held in
-- node.lua reports it.
local left = 0
if (tonumber(m[2]) or 0) > now then
	left = tonumber(m[6]) or 0
end
if (tonumber(m[3]) or 0) > now then
	left = math.max(left, tonumber(m[4]) or 0)
end
local out = {held, id, owner, pttl, fence, age, left, string.format('%d', now)}
-- They are read with pcall: a user whose ACL predates read-write locks,
-- and allows no sorted-set command, still inspects locks, and sees no
-- readers.
if KEYS[4] then
	local readers, intents = {}, 0
	local live = redis.pcall('ZRANGEBYSCORE', KEYS[3], '(' .. string.format('%d', now), '+inf', 'WITHSCORES')
	if type(live) == 'table' and not live.err then
		for i = 1, #live, 2 do
			local rid, rowner = holder(live[i])
			readers[#readers + 1] = rid
			readers[#readers + 1] = rowner
			readers[#readers + 1] = math.floor((tonumber(live[i + 1]) - now) / 1000)
		end
	end
	local n = redis.pcall('ZCOUNT', KEYS[4], '(' .. string.format('%d', now), '+inf')
	if type(n) == 'number' then
		intents = n
	end
	out[9] = readers
	out[10] = intents
end
return out
