-- holder.lua: how the scripts that show a lock to operators (inspect.lua,
-- force.lua, to which it is prepended) describe its holder without
-- revealing the token that lets the holder release it.
--
-- A lock key holds the acquisition's token, a space and the owner's label
-- (versions before 0.3 wrote the token alone). holder returns the first 12
-- hex digits of the token's SHA-1, which Lock.ID computes too, and the
-- label.
local function holder(v)
	local token, owner = string.match(v, '^(%S*) ?(.*)$')
	return string.sub(redis.sha1hex(token), 1, 12), owner
end

-- READERS is what a lock key holds while readers hold it (see node.lua).
local READERS = ${READERS}
