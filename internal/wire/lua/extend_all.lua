-- extend_all.lua: push the expiry of a lock on several keys further out
-- on one node, only if every key still holds the value. Runs after
-- node.lua.
--
-- KEYS[1..n]   the lock keys
-- KEYS[n+1..]  the node markers of their hash slots, each slot once
-- ARGV[1..2]   as extend.lua: token, the new TTL in milliseconds
-- ARGV[3]      n
--
-- Returns 1 when every key held the token and got the new TTL, -1 when a
-- key holds another token, 0 when a key is missing (none is re-created:
-- see extend.lua).
local n = tonumber(ARGV[3])
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
local now = now_us()
for i = n + 1, #KEYS do
	local st = record(KEYS[i])
	hold(st, ARGV[1], now, tonumber(ARGV[2]))
	put(st)
end
return 1
