#!lua flags=no-writes
--! include header.lua
--! include pause_tokens.lua
-- Whether a claim whose reply was lost landed. KEYS: header, pause tokens.
-- ARGV: token_id, the claim's nonce. Reply: {'ok', payload} or {'unknown'}.
local raw = redis.call('HGET', KEYS[2], ARGV[1])
if not raw then return {'unknown'} end
local status, _expires, claim, payload = token_parts(raw)
if status == 'C' and claim == ARGV[2] then return {'ok', payload} end
return {'unknown'}
