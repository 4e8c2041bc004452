#!lua
--! include header.lua
--! include messages.lua
--! include conversation_keys.lua
--! include legacy_layout.lua
-- Convert a conversation still holding an earlier layout (legacy_layout.lua), for a read
-- that found it. Idempotent: nothing to convert is a no-op, and so is a key no one may
-- read (absent, erased, past its drop deadline), which is left as it is.
-- KEYS: every key of the conversation. ARGV: none. Reply: 1 converted, 0 nothing to do.
local hd = read_header(h)
if not hd.owner or is_dead(hd, now_us()) then return 0 end
if upgrade_layout(hd) then return 1 end
return 0
