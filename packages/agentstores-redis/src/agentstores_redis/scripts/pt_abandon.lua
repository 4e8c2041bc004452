#!lua
--! include header.lua
--! include pause_tokens.lua
-- Mark a token abandoned (idempotent). KEYS: header, pause tokens.
-- ARGV: nonce, principal, token_id. Reply: {'ok', '1'} or {'not_found'}.
local h, tokens = KEYS[1], KEYS[2]
local _nonce, principal, token_id = unpack(ARGV, 1, 3)
local now = now_us()
local raw = owned_token(h, tokens, principal, token_id, now)
if not raw then return {'not_found'} end
local _status, expires, claim, payload = token_parts(raw)
redis.call('HSET', tokens, token_id, 'A|' .. expires .. '|' .. claim .. '|' .. payload)
return {'ok', '1'}
