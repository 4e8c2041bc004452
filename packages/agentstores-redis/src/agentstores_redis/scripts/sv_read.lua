#!lua flags=no-writes
--! include header.lua
-- The supervision row as the principal sees it. KEYS: header, supervision row.
-- ARGV: principal. Reply: {now} when invisible, else
-- {now, fence, owner, status, message_id, epoch, heartbeat_at} (row fields may be nil).
local now = now_us()
local hd = read_header(KEYS[1])
if not can_read(KEYS[1], hd, now, ARGV[1]) then return {fmt(now)} end
local r = redis.call('HMGET', KEYS[2], 'status', 'message_id', 'epoch', 'heartbeat_at')
return {fmt(now), hd.fence, hd.owner, r[1], r[2], r[3], r[4]}
