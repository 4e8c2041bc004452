#!lua
--! include header.lua
--! include wake.lua
-- Overwrite the recording, fenced by its own epoch too: an older turn's event never
-- replaces a newer turn's, nor a later index of the same turn.
-- KEYS: header, recording, [wake channel]. ARGV: nonce, principal, tenant, session_id, index, message
-- (JSON), message_id, epoch. Reply: {'ok', '1'} stored, {'ok', '0'} older, or a refusal.
local h, recording = KEYS[1], KEYS[2]
local nonce, principal, tenant, session_id, index, message, message_id, epoch =
  unpack(ARGV, 1, 8)
local now = now_us()
local hd = read_header(h)
local refusal = judge_write(hd, now, principal, epoch)
if refusal then return refusal end
local r = redis.call('HMGET', recording, 'index', 'message_id', 'epoch')
if r[3] then
  if decimal_lt(epoch, r[3]) then return {'fenced', r[3]} end
  if r[2] == message_id and r[3] == epoch and decimal_lt(index, r[1]) then
    return {'ok', '0'}
  end
end
redis.call('HSET', recording, 'index', index, 'message', message, 'message_id', message_id,
  'epoch', epoch)
commit(h, hd, principal, tenant, session_id, epoch, nonce, '1')
expire_with_header(hd, {recording})
wake(3)
return {'ok', '1'}
