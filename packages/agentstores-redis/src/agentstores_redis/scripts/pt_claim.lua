#!lua
--! include header.lua
--! include pause_tokens.lua
-- Claim a pending token once, remembering the claim's nonce (for reconciliation).
-- KEYS: header, pause tokens. ARGV: nonce, principal, token_id.
-- Reply: {'ok', payload}, {'not_found'}, {'already_claimed', status} or {'expired'}.
local h, tokens = KEYS[1], KEYS[2]
local nonce, principal, token_id = unpack(ARGV, 1, 3)
local now = now_us()
local raw = owned_token(h, tokens, principal, token_id, now)
if not raw then return {'not_found'} end
local status, expires, _claim, payload = token_parts(raw)
if status ~= 'P' then return {'already_claimed', status} end
if tonumber(expires) <= now then return {'expired'} end
redis.call('HSET', tokens, token_id, 'C|' .. expires .. '|' .. nonce .. '|' .. payload)
return {'ok', payload}
