#!lua
--! include header.lua
--! include conversation_keys.lua
--! include wake.lua
-- Erase a conversation (every store's keys) and leave a tombstone for ttl ms. Modes:
-- 'owner' (the principal's delete), 'expired', 'idle' (param: idle microseconds),
-- 'overcap' (param: the updated_at the sweeper ranked; principal: the owner it saw).
-- KEYS: every key of the conversation, [wake channel]. ARGV: nonce, mode, principal, param, ttl ms.
-- Reply: {'ok', '1', erased owner}, {'ok', '0'} (nothing to erase) or a refusal.
local nonce, mode, principal, param, ttl = unpack(ARGV, 1, 5)
local now = now_us()
local hd = read_header(h)
if not header_exists(hd) or hd.erased_at then return {'ok', '0'} end
if mode == 'owner' then
  if hd.owner ~= principal then return {'not_owned'} end
elseif mode == 'expired' then
  local expires = redis.call('HGET', h, 'expires_at')
  if not (expires and tonumber(expires) <= now) then return {'ok', '0'} end
else
  if is_dead(hd, now) then return {'ok', '0'} end
  local updated = redis.call('HGET', meta, 'updated_at')
  if not updated then return {'ok', '0'} end
  if mode == 'idle' then
    if not (tonumber(updated) < now - tonumber(param)) then return {'ok', '0'} end
  elseif mode == 'overcap' then
    if updated ~= param or hd.owner ~= principal then return {'ok', '0'} end
  else
    return redis.error_reply('unknown erase mode ' .. mode)
  end
end
local raw_key = redis.call('HMGET', h, 'tenant', 'session_id', 'owner')
redis.call('UNLINK', unpack(DATA))
redis.call('DEL', h)
redis.call('HSET', h, 'erased_at', fmt(now), 'tenant', raw_key[1] or '',
  'session_id', raw_key[2] or '', 'erased_owner', raw_key[3] or '', 'last_write', nonce,
  'last_result', '1')
redis.call('PEXPIREAT', h, fmt(math.floor(now / 1000) + tonumber(ttl)))
wake(14)
return {'ok', '1', raw_key[3] or ''}
