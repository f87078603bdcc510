-- acquire_all.lua: take a lock on several keys at once on one node, all
-- of them or none. Runs after node.lua.
--
-- KEYS[1..n]    the lock keys, sorted and distinct
-- KEYS[n+1..]   the node markers of their hash slots, each slot once
-- ARGV[1..3]    as acquire.lua: value, TTL, quarantine
-- ARGV[4]       n
--
-- Returns what acquire.lua returns; a key held by another value gives
-- {0, its pttl, ...}. The fence is greater than the counter of every
-- slot of the keys and than the node's clock, and becomes the counter of
-- each: the next owner of any of the keys gets a greater one.
local n = tonumber(ARGV[4])
local now = now_us()
local ttl, quarantine = tonumber(ARGV[2]), tonumber(ARGV[3])
local age, maxttl, wait = nil, 0, 0
local markers = {}
for i = n + 1, #KEYS do
	local st = marker(KEYS[i], now, quarantine > 0)
	local a, l, w = standing(st, now, ttl, quarantine)
	markers[#markers + 1] = st
	age, maxttl, wait = math.min(age or a, a), math.max(maxttl, l), math.max(wait, w)
end
if wait > 0 then
	return {-1, wait, age, maxttl}
end
local ours = 0
for i = 1, n do
	local v = redis.call('GET', KEYS[i])
	if v == ARGV[1] then
		ours = ours + 1
	elseif v then
		return {0, redis.call('PTTL', KEYS[i]), age, maxttl}
	end
end
local fence = 0
for _, st in ipairs(markers) do
	fence = math.max(fence, st.fence)
end
if ours == n then
	-- A client library re-sending the call after the first reply was lost
	-- finds its own grant, as in acquire.lua.
	return {1, fence, age, math.max(maxttl, ttl)}
end
fence = math.max(fence + 1, now)
for i = 1, n do
	redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
for _, st in ipairs(markers) do
	hold(st, ARGV[1], now, ttl)
	put(st, fence)
	maxttl = math.max(maxttl, held(st, now))
end
return {1, fence, age, maxttl}
