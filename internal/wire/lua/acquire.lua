-- acquire.lua: take the lock on one node, on one key or on several keys
-- at once (all of them or none). Runs after acquire_one.lua, which defines
-- n, ttl and quarantine from ARGV and returns in the common case, and
-- after node.lua.
--
-- KEYS[1..n]   the lock keys, sorted and distinct
-- KEYS[n+1..]  the node markers of their hash slots (see node.lua), each
--              slot once; a marker holds its slot's fence counter
-- ARGV[1]      the value of this acquisition round: its token (random,
--              never reused), a space and the owner's label
-- ARGV[2]      the time to live in milliseconds
-- ARGV[3]      the quarantine the client asks for, in milliseconds; 0 for
--              none
-- ARGV[4]      n, the number of keys; absent for one key
--
-- Returns {status, value, age, left}, where age is how long ago the
-- redis-server process started and left how long a lock granted in the
-- slots may still be held (at least the TTL, for a grant), both in
-- milliseconds, and:
--   { 1, fence, ...}  the keys now hold the value; fence is the lock's
--                     fencing token on this node (see grant in node.lua)
--   { 0, pttl,  ...}  another value holds a key for pttl more ms (a lock,
--                     a writer, or readers: see rw_read.lua)
--   {-1, wait,  ...}  the node is in quarantine for wait more ms: it
--                     restarted too recently to know which locks it lost
--
-- One key's grant is a SET NX PX. When a key already holds our own
-- value, this is a client library re-sending the command after the first
-- reply was lost; the first call ran after the round started, so the key
-- lives at least as long as the round assumes, and the retry counts as a
-- grant, with the slots' counter, which is at least its fence, as its
-- fence. Several keys are all read before any is written, so that a key
-- held by another value leaves the others as they were; their fence is
-- greater than the counter of every slot of the keys and than the node's
-- clock, and becomes the counter of each: the next owner of any of the
-- keys gets a greater one.
local now = now_us()
local age, left, wait = nil, 0, 0
local markers = {}
for i = n + 1, #KEYS do
	local st = marker(KEYS[i], now, quarantine > 0)
	local a, l, w = standing(st, now, ttl, quarantine)
	markers[#markers + 1] = st
	age, left, wait = math.min(age or a, a), math.max(left, l), math.max(wait, w)
end
if wait > 0 then
	return {-1, wait, age, left}
end
if n == 1 then
	-- SET NX GET (Redis 7) sets the key only if it is absent and returns
	-- what it held, in one call: a key that is taken costs no GET.
	local st = markers[1]
	local v = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2], 'GET')
	if not v then
		local fence = grant(st, ARGV[1], now, ttl)
		return {1, fence, age, held(st, now)}
	end
	if v == ARGV[1] then
		return {1, st.fence, age, math.max(left, ttl)}
	end
	return {0, redis.call('PTTL', KEYS[1]), age, left}
end
local ours = 0
for i = 1, n do
	local v = redis.call('GET', KEYS[i])
	if v == ARGV[1] then
		ours = ours + 1
	elseif v then
		return {0, redis.call('PTTL', KEYS[i]), age, left}
	end
end
local fence = 0
for _, st in ipairs(markers) do
	fence = math.max(fence, st.fence)
end
if ours == n then
	return {1, fence, age, math.max(left, ttl)}
end
fence = math.max(fence + 1, now)
for i = 1, n do
	redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
for _, st in ipairs(markers) do
	hold(st, ARGV[1], now, ttl)
	put(st, fence)
	left = math.max(left, held(st, now))
end
return {1, fence, age, left}
