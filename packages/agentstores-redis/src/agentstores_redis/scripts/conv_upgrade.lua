#!lua
--! include header.lua
--! include messages.lua
--! include conversation_keys.lua
--! include legacy_layout.lua
-- Convert a conversation still holding the previous layout (legacy_layout.lua), for a
-- read that found it. Idempotent: nothing to convert is a no-op.
-- KEYS: every key of the conversation. ARGV: none. Reply: 1 converted, 0 nothing to do.
if upgrade_layout() then return 1 end
return 0
