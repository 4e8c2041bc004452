#!lua
--! include header.lua
--! include conversation_keys.lua
-- Create a branch: a new conversation holding the given messages, owned by the caller.
-- KEYS: every key of the new conversation. ARGV: nonce, principal, tenant, session_id,
-- title ('' none, '=<title>'), message count, then per message: id, role, compaction
-- ('1'/'0'), body; then the number of metadata pairs and per pair: name, value.
-- Reply: {'ok', created_us} or {'exists'}.
local nonce, principal, tenant, session_id, title = unpack(ARGV, 1, 5)
local n = tonumber(ARGV[6])
if redis.call('EXISTS', h) == 1 then return {'exists'} end
local now = now_us()
for i = 0, n - 1 do
  local b = 7 + 4 * i
  add_message(i, now, ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3])
end
local fields = {'count', fmt(n), 'last_created', fmt(now), 'updated_at', fmt(now),
  'created_at', fmt(now)}
if n > 0 then fields[#fields + 1] = 'tail'; fields[#fields + 1] = ARGV[7 + 4 * (n - 1)] end
if title ~= '' then fields[#fields + 1] = 'title'; fields[#fields + 1] = string.sub(title, 2) end
redis.call('HSET', meta, unpack(fields))
md_apply(8 + 4 * n, tonumber(ARGV[7 + 4 * n]))
redis.call('HSET', h, 'owner', principal, 'tenant', tenant, 'session_id', session_id,
  'last_write', nonce, 'last_result', fmt(now))
return {'ok', fmt(now)}
