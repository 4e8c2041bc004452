#!lua flags=no-writes
--! include header.lua
-- The agent state blob as the principal sees it. KEYS: header, state. ARGV: principal.
-- Reply: {} when invisible, else {blob or nil}.
local now = now_us()
local hd = read_header(KEYS[1])
if not can_read(KEYS[1], hd, now, ARGV[1]) then return {} end
return {redis.call('GET', KEYS[2])}
