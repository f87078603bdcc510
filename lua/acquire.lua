-- acquire.lua: take the lock on one node.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the token of this acquisition round (random, never reused)
-- ARGV[2]  the time to live in milliseconds
--
-- Returns {1, 0} when the key now holds the token, {0, pttl} when another
-- token holds it (pttl is its remaining time to live in milliseconds).
--
-- The grant is a plain SET NX PX. When the key already holds our own token,
-- this is a client library re-sending the command after the first reply
-- was lost; the first SET ran after the round started, so the key lives at
-- least as long as the round assumes, and the retry counts as a grant.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
	return {1, 0}
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return {1, 0}
end
return {0, redis.call('PTTL', KEYS[1])}
