#!lua
--! include header.lua
-- Store a new pending pause token. KEYS: header, pause tokens.
-- ARGV: nonce, principal, tenant, session_id, token_id, payload, expires_us, epoch.
-- Reply: {'ok', '1'}, {'exists'} (the token id is taken) or a refusal.
local h, tokens = KEYS[1], KEYS[2]
local nonce, principal, tenant, session_id, token_id, payload, expires, epoch =
  unpack(ARGV, 1, 8)
local now = now_us()
local hd = read_header(h)
local refusal = judge_write(hd, now, principal, epoch)
if refusal then return refusal end
if redis.call('HEXISTS', tokens, token_id) == 1 then return {'exists'} end
redis.call('HSET', tokens, token_id, 'P|' .. expires .. '||' .. payload)
commit(h, hd, principal, tenant, session_id, epoch, nonce, '1')
expire_with_header(hd, {tokens})
return {'ok', '1'}
