#!lua
--! include header.lua
-- Delete the agent state blob. KEYS: header, state.
-- ARGV: nonce, principal, tenant, session_id, epoch.
-- Reply: {'ok', '1'} done, {'ok', '0'} no key, or a refusal.
local h, state = KEYS[1], KEYS[2]
local nonce, principal, tenant, session_id, epoch = unpack(ARGV, 1, 5)
local now = now_us()
local hd = read_header(h)
if not header_exists(hd) then return {'ok', '0'} end
local refusal = judge_write(hd, now, principal, epoch)
if refusal then return refusal end
redis.call('DEL', state)
commit(h, hd, principal, tenant, session_id, epoch, nonce, '1')
return {'ok', '1'}
