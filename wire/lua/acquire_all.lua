-- acquire_all.lua: take a lock on several keys at once on one node, all
-- of them or none. Runs after node.lua.
--
-- KEYS[1..n]     the lock keys, sorted and distinct
-- KEYS[n+1..2n]  their fence counters, in the same order
-- KEYS[2n+1..]   the node markers of their hash slots, each slot once
-- ARGV[1..4]     as acquire.lua: value, TTL, quarantine, fence counter TTL
-- ARGV[5]        n
--
-- Returns what acquire.lua returns; a key held by another value gives
-- {0, its pttl, ...}. The fence is greater than every counter of the keys
-- and than the node's clock, and is written to every counter: the next
-- owner of any of the keys gets a greater one.
local n = tonumber(ARGV[5])
local now = now_us()
local ttl, quarantine = tonumber(ARGV[2]), tonumber(ARGV[3])
local age, maxttl, wait = nil, 0, 0
local markers = {}
for i = 2 * n + 1, #KEYS do
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
if ours == n then
	-- A client library re-sending the call after the first reply was lost
	-- finds its own grant, as in acquire.lua.
	for i = n + 1, 2 * n do
		fence = math.max(fence, tonumber(redis.call('GET', KEYS[i])) or 0)
	end
	return {1, fence, age, math.max(maxttl, ttl)}
end
for _, st in ipairs(markers) do
	maxttl = math.max(maxttl, hold(st, ARGV[1], now, ttl))
end
fence = now
for i = n + 1, 2 * n do
	local old = tonumber(redis.call('GET', KEYS[i]))
	if old and old >= fence then
		fence = old + 1
	end
end
local f = string.format('%d', fence)
for i = 1, n do
	redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
	redis.call('SET', KEYS[n + i], f, 'PX', ARGV[4])
end
return {1, fence, age, maxttl}
