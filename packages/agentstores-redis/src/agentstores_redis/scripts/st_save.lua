#!lua
--! include header.lua
-- Store the agent state blob. KEYS: header, state.
-- ARGV: nonce, principal, tenant, session_id, blob, epoch. Reply: {'ok', '1'} or a refusal.
local h, state = KEYS[1], KEYS[2]
local nonce, principal, tenant, session_id, blob, epoch = unpack(ARGV, 1, 6)
local now = now_us()
local hd = read_header(h)
local refusal = judge_write(hd, now, principal, epoch)
if refusal then return refusal end
redis.call('SET', state, blob)
commit(h, hd, principal, tenant, session_id, epoch, nonce, '1')
expire_with_header(hd, {state})
return {'ok', '1'}
