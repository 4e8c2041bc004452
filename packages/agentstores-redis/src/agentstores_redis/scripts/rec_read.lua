#!lua flags=no-writes
--! include header.lua
-- The recording as the principal sees it. KEYS: header, recording. ARGV: principal.
-- Reply: {} when invisible, else {index, message, message_id, epoch} (nil when none).
local now = now_us()
local hd = read_header(KEYS[1])
if not can_read(KEYS[1], hd, now, ARGV[1]) then return {} end
return redis.call('HMGET', KEYS[2], 'index', 'message', 'message_id', 'epoch')
