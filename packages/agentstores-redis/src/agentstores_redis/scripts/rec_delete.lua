#!lua
--! include header.lua
--! include wake.lua
-- Delete the recording if it is still the given turn's.
-- KEYS: header, recording, [wake channel]. ARGV: nonce, principal, tenant, session_id, message_id, epoch.
-- Reply: {'ok', '1'} deleted, {'ok', '0'} not, or a refusal.
local h, recording = KEYS[1], KEYS[2]
local nonce, principal, tenant, session_id, message_id, epoch = unpack(ARGV, 1, 6)
local now = now_us()
local hd = read_header(h)
if not header_exists(hd) then return {'ok', '0'} end
local refusal = judge_write(hd, now, principal, epoch)
if refusal then return refusal end
local result = '0'
if redis.call('HGET', recording, 'message_id') == message_id then
  redis.call('DEL', recording)
  result = '1'
  wake(3)
end
commit(h, hd, principal, tenant, session_id, epoch, nonce, result)
return {'ok', result}
