-- probe.lua: report the node's state without touching any lock. Runs
-- after node.lua.
--
-- KEYS[1]  the node marker (see node.lua)
--
-- Returns {age, maxttl, clock, id}: how long ago the redis-server process
-- started and how long a lock granted in the slot may still be held, in
-- milliseconds, the node's clock in milliseconds since 1970, and the
-- server's run_id ("" from a server without INFO, as the redlock demo's
-- in-process nodes), which tells the client when two of its nodes are one
-- server.
local now = now_us()
local age, left = standing(marker(KEYS[1], now, true), now, 0, 0)
-- INFO as node.lua calls it: a user whose ACL denies INFO gets its error,
-- and so does not pass for a server of its own.
local id = string.match(info('server'), 'run_id:(%x+)') or ''
return {age, left, math.floor(now / 1000), id}
