#!lua
--! include header.lua
--! include conversation_keys.lua
-- Share the conversation with another principal, or stop sharing it (owner only).
-- KEYS: every key of the conversation. ARGV: nonce, principal, other principal,
-- '1' share / '0' unshare. Reply: {'ok', '1'} or a refusal.
local nonce, principal, other, share = unpack(ARGV, 1, 4)
local now = now_us()
local hd = read_header(h)
if header_exists(hd) and is_dead(hd, now) then return erased_reply(hd) end
if redis.call('EXISTS', meta) == 0 then return {'not_found'} end
if hd.owner ~= principal then return {'not_owned'} end
if share == '1' then
  redis.call('HSET', h, 'shared:' .. other, '1')
else
  redis.call('HDEL', h, 'shared:' .. other)
end
redis.call('HSET', h, 'last_write', nonce, 'last_result', '1')
return {'ok', '1'}
