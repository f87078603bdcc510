-- rw_release.lua: give a reader's share of a read-write lock up on one
-- node, or clean up after a reader's round that failed.
--
-- KEYS[1]  the readers (see rw_read.lua)
-- KEYS[2]  the lock key, which holds READERS while readers hold (see
--          rw_read.lua), and whose channel announces releases
-- KEYS[3]  the node marker of its slot (see node.lua)
-- ARGV[1..2]  as release.lua: value, the reader's fence
--
-- Returns {status, told} as release.lua does: status 1 when the token was
-- a live reader and is removed, 0 when it was not there (expired, or never
-- granted); a reader is never held by another token, so never -1.
--
-- Releasing the last live reader is announced on the channel of KEYS[2]
-- (see announce.lua), where waiting writers listen. As in release.lua,
-- the removal comes before any write that may use memory, and the
-- counter is raised to at least the reader's fence.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local status, told = 0, 0
local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if score then
	redis.call('ZREM', KEYS[1], ARGV[1])
	if score > now then
		status = 1
	end
	redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))
	local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
	local readers = redis.call('GET', KEYS[2]) == READERS
	if last[2] then
		local keep = math.ceil((tonumber(last[2]) - now) / 1000)
		redis.call('PEXPIRE', KEYS[1], keep)
		if readers then
			redis.call('PEXPIRE', KEYS[2], keep)
		end
	else
		if readers then
			redis.call('DEL', KEYS[2])
		end
		if status == 1 then
			told = announce(KEYS[2])
		end
	end
end
local err = settle(KEYS[3], ARGV[1], ARGV[2], status == 1)
if err then
	return redis.error_reply(err)
end
return {status, told}
