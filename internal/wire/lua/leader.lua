-- leader.lua: who leads an election, as one node sees it, read without
-- writing anything. Runs after holder.lua.
--
-- KEYS[1]  the election's lock key
-- KEYS[2]  the election's term record (see elect.lua)
--
-- Returns {held, id, value, pttl, term}: held, id, value (the owner label)
-- and pttl as inspect.lua gives them for the lock key, and the term of the
-- record if it names the same id, else 0.
local held, id, value, pttl, term = 0, '', '', 0, 0
local v = redis.call('GET', KEYS[1])
if v then
	held, pttl = 1, redis.call('PTTL', KEYS[1])
	id, value = holder(v)
	local rec = redis.call('GET', KEYS[2])
	if rec then
		local rid, rterm = string.match(rec, '^(%S+) (%d+)$')
		if rid == id then
			term = tonumber(rterm)
		end
	end
end
return {held, id, value, pttl, term}
