-- probe.lua: report the node's state without touching any lock. Runs
-- after node.lua.
--
-- KEYS[1]  the node marker (see node.lua)
--
-- Returns {age, maxttl, clock}: how long ago the redis-server process
-- started and how long a lock granted in the slot may still be held, in milliseconds, and the
-- node's clock in milliseconds since 1970.
local now = now_us()
local age, left = standing(marker(KEYS[1], now, true), now, 0, 0)
return {age, left, math.floor(now / 1000)}
