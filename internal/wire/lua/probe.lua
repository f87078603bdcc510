-- probe.lua: report the node's state without touching any lock. Runs
-- after node.lua.
--
-- KEYS[1]  the node marker (see node.lua)
--
-- Returns {age, maxttl, clock, id}: how long ago the redis-server process
-- started and how long a lock granted in the slot may still be held, in
-- milliseconds, the node's clock in milliseconds since 1970, and the
-- server's run_id ("" if INFO is denied), which tells the client when two
-- of its nodes are one server.
local now = now_us()
local age, left = standing(marker(KEYS[1], now, true), now, 0, 0)
local info = redis.pcall('INFO', 'server')
local id = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or ''
return {age, left, math.floor(now / 1000), id}
