#!lua
--! include header.lua
-- Supervision compare-and-swap: replace the row only if its epoch is the expected one.
-- KEYS: header, supervision row. ARGV: nonce, principal, tenant, session_id, expected
-- epoch ('' = no row yet), status, message_id, epoch.
-- Reply: {'ok', '1'} swapped, {'ok', '0'} not (dead key, fenced, other row), or a refusal.
local h, row = KEYS[1], KEYS[2]
local nonce, principal, tenant, session_id, expected, status, message_id, epoch =
  unpack(ARGV, 1, 8)
local now = now_us()
local hd = read_header(h)
if header_exists(hd) then
  if is_dead(hd, now) then return {'ok', '0'} end
  if hd.owner ~= principal then return {'not_owned'} end
  if decimal_lt(epoch, hd.fence) then return {'ok', '0'} end
end
local current = redis.call('HGET', row, 'epoch')
if expected == '' then
  if current then return {'ok', '0'} end
elseif current ~= expected then
  return {'ok', '0'}
end
redis.call('HSET', row, 'status', status, 'message_id', message_id, 'epoch', epoch,
  'heartbeat_at', fmt(now))
commit(h, hd, principal, tenant, session_id, epoch, nonce, '1')
expire_with_header(hd, {row})
return {'ok', '1'}
