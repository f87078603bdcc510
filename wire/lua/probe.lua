-- probe.lua: report the node's state without touching any lock. Runs
-- after node.lua.
--
-- KEYS[1]  the node marker (see node.lua)
--
-- Returns {age, maxttl, clock}: how long ago the redis-server process
-- started and the largest TTL recorded on the node, in milliseconds, and the
-- node's clock in milliseconds since 1970.
local now = now_us()
local start, maxttl = marker(KEYS[1], now, true)
return {math.max(math.floor((now - start) / 1000), 0), maxttl, math.floor(now / 1000)}
