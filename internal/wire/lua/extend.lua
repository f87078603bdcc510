-- extend.lua: push the expiry of our lock further out on one node, on one
-- key or on several keys, only if every key still holds the value. Runs
-- after horizon.lua.
--
-- KEYS[1..n]   the lock keys
-- KEYS[n+1..]  the node markers of their hash slots (see node.lua), each
--              slot once; then, for a permit, its semaphore's size record
--              (see acquire_permit.lua)
-- ARGV[1]      the value of the acquisition being extended
-- ARGV[2]      the new time to live in milliseconds, counted from now
-- ARGV[3]      n, the number of keys; absent for one key
-- ARGV[4]      "size" when the last key is a permit's size record
--
-- Returns 1 when every key held the value and got the new time to live,
-- -1 when a key holds another value, 0 when a key is missing.
--
-- A missing key is never re-created: once the lock has expired on a node,
-- someone else may have taken and released it there in the meantime. The
-- new end is recorded in the markers, so that quarantine covers it.
local n = tonumber(ARGV[3]) or 1
local last = #KEYS
if ARGV[4] == 'size' then
	last = last - 1
end
for i = 1, n do
	local v = redis.call('GET', KEYS[i])
	if v ~= ARGV[1] then
		if v then
			return -1
		end
		return 0
	end
end
for i = 1, n do
	redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
if last < #KEYS then
	redis.call('PEXPIRE', KEYS[#KEYS], ARGV[2], 'GT')
end
local now, ttl = now_us(), tonumber(ARGV[2])
for i = n + 1, last do
	-- Most extensions end within the horizon that the marker records
	-- for all grants (see hold), which two fields tell.
	local h = redis.call('HMGET', KEYS[i], 'until2', 'ttl2')
	local hi2, ttl2 = tonumber(h[1]), tonumber(h[2])
	if not (hi2 and ttl2 and now + ttl * 1000 <= hi2 and ttl <= ttl2) then
		local st = record(KEYS[i])
		hold(st, ARGV[1], now, ttl)
		put(st)
	end
end
return 1
