#!lua
--! include header.lua
--! include conversation_keys.lua
-- Set the last turn status (a no-op on an absent or dead conversation).
-- KEYS: every key of the conversation. ARGV: nonce, principal, tenant, session_id,
-- status, epoch. Reply: {'ok', '1', updated_us}, {'ok', '0'} or a refusal.
local nonce, principal, tenant, session_id, status, epoch = unpack(ARGV, 1, 6)
local now = now_us()
local hd = read_header(h)
if header_exists(hd) and is_dead(hd, now) then return {'ok', '0'} end
if redis.call('EXISTS', meta) == 0 then return {'ok', '0'} end
local refusal = judge_write(hd, now, principal, epoch)
if refusal then return refusal end
local updated = touched_at(now)
redis.call('HSET', meta, 'status', status, 'updated_at', fmt(updated))
commit(h, hd, principal, tenant, session_id, epoch, nonce, fmt(updated))
return {'ok', '1', fmt(updated)}
