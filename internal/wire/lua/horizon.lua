-- horizon.lua: the node's clock and the horizon of the grants in a slot's
-- marker (the fields until, ttl1, who, until2 and ttl2; see node.lua), which
-- every script that grants or extends keeps. It comes first in those
-- scripts; node.lua, which reads and writes the rest of the marker,
-- follows it in the scripts that grant. extend.lua needs only this part,
-- and so does not pay for defining the rest on every call.

-- now_us returns the node's clock in microseconds. Microseconds since 1970
-- are about 1.8e15, below 2^53, so a Lua number (a double) holds them
-- exactly.
local function now_us()
	local t = redis.call('TIME')
	return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- record returns the part of the marker at key that hold needs, for a
-- script that extends a grant and needs no more.
local function record(key)
	local m = redis.call('HMGET', key, 'until', 'who', 'until2', 'ttl2', 'ttl1')
	return {key = key, hi = tonumber(m[1]) or 0, who = m[2] or '', hi2 = tonumber(m[3]) or 0, ttl2 = tonumber(m[4]) or 0,
		ttl1 = tonumber(m[5]) or 0}
end

-- held returns the longest TTL (ms) of a grant that the record st knows
-- of and that may still be held at now (µs); 0 when none may. It is a
-- TTL, not the time left: a client holds a node that restarted back
-- while the node is younger than it (see quarantine.go). A grant lost in
-- the restart was made before the node's start and is still held, so its
-- TTL exceeds the node's age; the time left of a grant made before the
-- restart does not, and would let the node vote while the grant is held.
local function held(st, now)
	local t = 0
	if st.hi > now then
		t = st.ttl1
	end
	if st.hi2 > now then
		t = math.max(t, st.ttl2)
	end
	return t
end

-- hold records in st, the record of a marker, that token holds a grant
-- in its slot from now (µs) for ttl (ms), setting st.dirty when the
-- marker's horizon must change (put writes it).
local function hold(st, token, now, ttl)
	local e = now + ttl * 1000
	if (e <= st.hi2 and ttl <= st.ttl2) or (st.who == token and e <= st.hi) then
		return
	end
	st.dirty = true
	if st.who == token then
		st.hi, st.ttl1 = math.max(st.hi, e), math.max(st.ttl1, ttl)
	elseif ttl > ${LONG_GRANT} and e > st.hi and e - st.hi2 > st.hi2 - now then
		-- The grant of token who may still be held: its end and its TTL
		-- join the rest.
		if st.hi > now then
			st.ttl2 = math.max(st.ttl2, st.ttl1)
		end
		st.hi2 = math.max(st.hi, st.hi2)
		st.hi, st.who, st.ttl1 = e, token, ttl
	else
		if st.hi2 <= now then
			st.ttl2 = 0 -- every grant it covered has ended
		end
		st.hi2, st.ttl2 = math.max(st.hi2, e + ttl * 1000), math.max(st.ttl2, ttl)
	end
end

-- put writes to the marker of st, in one call, fence as its counter
-- unless fence is nil, and its horizon if hold changed it.
local function put(st, fence)
	if not st.dirty then
		-- The common case: a grant whose horizon the marker covers.
		if fence then
			redis.call('HSET', st.key, 'fence', string.format('%d', fence))
		end
		return
	end
	local a = {'until', string.format('%d', st.hi), 'who', st.who,
		'until2', string.format('%d', st.hi2), 'ttl2', st.ttl2, 'ttl1', st.ttl1}
	if fence then
		a[11], a[12] = 'fence', string.format('%d', fence)
	end
	st.dirty = false
	redis.call('HSET', st.key, unpack(a))
end
