-- release_all.lua: give up a lock on several keys on one node: what
-- release.lua does for each key. Runs after counter.lua.
--
-- KEYS[1..n]    the lock keys
-- KEYS[n+1..]   the node markers of their hash slots, each slot once
-- ARGV[1..2]    as release.lua: value, the lock's fence
-- ARGV[3]       n
-- ARGV[4]       optional: "quiet", as ARGV[3] of release.lua
--
-- Returns {status, told}: status 1 when some key held the value (every
-- such key is deleted), else -1 when some key holds another value, else
-- 0; told as in release.lua, summed over the keys.
local n = tonumber(ARGV[3])
local deleted, foreign, told = 0, 0, 0
for i = 1, n do
	local v = redis.call('GET', KEYS[i])
	if v == ARGV[1] then
		redis.call('DEL', KEYS[i])
		deleted = deleted + 1
		if ARGV[4] ~= 'quiet' then
			local t = redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[i], '')
			if type(t) == 'number' then
				told = told + t
			end
		end
	elseif v then
		foreign = foreign + 1
	end
end
for i = n + 1, #KEYS do
	local err = settle(KEYS[i], ARGV[1], ARGV[2], deleted > 0)
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
