#!lua
--! include header.lua
--! include wake.lua
-- Delete the supervision row if it is still the given turn's.
-- KEYS: header, supervision row, [wake channel]. ARGV: nonce, principal, message_id, epoch.
-- Reply: {'ok', '1'} deleted, {'ok', '0'} not, or a refusal.
local h, row = KEYS[1], KEYS[2]
local nonce, principal, message_id, epoch = unpack(ARGV, 1, 4)
local now = now_us()
local hd = read_header(h)
if not header_exists(hd) or is_dead(hd, now) then return {'ok', '0'} end
if hd.owner ~= principal then return {'not_owned'} end
local r = redis.call('HMGET', row, 'message_id', 'epoch')
if r[1] ~= message_id or r[2] ~= epoch then return {'ok', '0'} end
redis.call('DEL', row)
redis.call('HSET', h, 'last_write', nonce, 'last_result', '1')
wake(3)
return {'ok', '1'}
