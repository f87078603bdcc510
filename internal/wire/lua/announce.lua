-- announce.lua: how the scripts that end holds (release.lua,
-- release_permit.lua, rw_release.lua, rw_drop.lua and force.lua, to which
-- it is prepended) wake the waiters of a key.

-- announce publishes on the channel of key's releases, ${RELEASED} .. key,
-- where the waiters of key listen, so that they wake at once instead of
-- polling, and returns how many clients it told. The publication is best
-- effort: where it fails, as for a user whose ACL does not allow the
-- channel, it told none, the script goes on (what it deleted stays
-- deleted: a script is not rolled back), and the waiters poll.
local function announce(key)
	local told = redis.pcall('PUBLISH', ${RELEASED} .. key, '')
	if type(told) ~= 'number' then
		return 0
	end
	return told
end

