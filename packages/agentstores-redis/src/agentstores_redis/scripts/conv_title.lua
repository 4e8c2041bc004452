#!lua
--! include header.lua
--! include conversation_keys.lua
-- Set or clear the title. KEYS: every key of the conversation.
-- ARGV: nonce, principal, tenant, session_id, title ('' clear, '=<title>' set), epoch.
-- Reply: {'ok', '1', updated_us} or a refusal.
local nonce, principal, tenant, session_id, title, epoch = unpack(ARGV, 1, 6)
local now = now_us()
local hd = read_header(h)
local refusal = judge_existing(hd, now, principal, epoch)
if refusal then return refusal end
local updated = touched_at(now)
if title == '' then
  redis.call('HDEL', meta, 'title')
else
  redis.call('HSET', meta, 'title', string.sub(title, 2))
end
redis.call('HSET', meta, 'updated_at', fmt(updated))
commit(h, hd, principal, tenant, session_id, epoch, nonce, fmt(updated))
return {'ok', '1', fmt(updated)}
