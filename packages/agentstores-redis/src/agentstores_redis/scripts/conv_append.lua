#!lua
--! include header.lua
--! include messages.lua
--! include conversation_keys.lua
--! include wake.lua
--! include legacy_layout.lua
-- Append messages, atomically and idempotently (ids already present are skipped).
-- KEYS: every key of the conversation, [wake channel]. ARGV: nonce, principal, tenant, session_id,
-- create ('1'/'0'), status ('' = keep), tail mode (U no condition, N must be empty,
-- I must be expected), expected tail, epoch, title ('' keep, '=<title>' set),
-- expires_us ('' keep), tombstone ttl ms, expiry grace us, message count, then per
-- message: id, role, compaction ('1'/'0'), body; then the metadata limit, the number of
-- metadata pairs ('0' none) and per pair: name, value ('' remove).
-- Reply: {'ok', '<first seq>|<created_us>|<created 1/0>|<updated_us>|<positions>'}
-- (positions: '*' all appended, else the appended ones' indexes), {'noop'}, a refusal,
-- {'not_found'}, {'stale_tail', tail} or {'too_big', size}.
local nonce, principal, tenant, session_id, create, status, mode, expected, epoch, title,
  expires, ttl, grace = unpack(ARGV, 1, 13)
local n = tonumber(ARGV[14])
local now = now_us()
local hd = read_header(h)
if header_exists(hd) and is_dead(hd, now) then return erased_reply(hd) end
local have = redis.call('EXISTS', meta) == 1
if not have and create == '0' then return {'not_found'} end
local refusal = judge_write(hd, now, principal, epoch)
if refusal then return refusal end
local fresh = {}
for i = 0, n - 1 do
  if redis.call('HEXISTS', message_ids, ARGV[15 + 4 * i]) == 0 then fresh[#fresh + 1] = i end
end
if n > 0 and #fresh == 0 then return {'noop'} end
local stored = {false, false, false, false}
if have then stored = redis.call('HMGET', meta, 'tail', 'count', 'last_created', 'updated_at') end
local tail = stored[1]
if mode == 'N' and tail then return {'stale_tail', tail} end
if mode == 'I' and tail ~= expected then return {'stale_tail', tail or ''} end
local md_max, md_n = ARGV[15 + 4 * n], tonumber(ARGV[16 + 4 * n])
local md_first = 17 + 4 * n
if md_n > 0 then
  local too_big = md_refusal(md_first, md_n, md_max)
  if too_big then return too_big end
end
upgrade_layout()
local count = tonumber(stored[2] or '0')
local created = now
if stored[3] and tonumber(stored[3]) > created then created = tonumber(stored[3]) end
local updated = now
if stored[4] and tonumber(stored[4]) > updated then updated = tonumber(stored[4]) end
local first = count
for _, i in ipairs(fresh) do
  local b = 15 + 4 * i
  add_message(count, created, ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3])
  count = count + 1
end
local fields = {'count', fmt(count), 'last_created', fmt(created), 'updated_at', fmt(updated)}
if #fresh > 0 then
  fields[#fields + 1] = 'tail'; fields[#fields + 1] = ARGV[15 + 4 * fresh[#fresh]]
end
if not have then fields[#fields + 1] = 'created_at'; fields[#fields + 1] = fmt(now) end
if status ~= '' then fields[#fields + 1] = 'status'; fields[#fields + 1] = status end
if title ~= '' then fields[#fields + 1] = 'title'; fields[#fields + 1] = string.sub(title, 2) end
if expires ~= '' then fields[#fields + 1] = 'expires_at'; fields[#fields + 1] = expires end
redis.call('HSET', meta, unpack(fields))
md_apply(md_first, md_n)
local positions = '*'
if #fresh < n then positions = table.concat(fresh, ',') end
local is_new = '0'
if not have then is_new = '1' end
local result = fmt(first) .. '|' .. fmt(created) .. '|' .. is_new .. '|' .. fmt(updated) .. '|'
  .. positions
commit(h, hd, principal, tenant, session_id, epoch, nonce, result)
if expires ~= '' then
  -- expired conversations stay (per the contract) until the sweeper erases them; the
  -- server drops them by itself 'grace' after expires_at if no sweeper did
  local drop_at = math.max(tonumber(expires), now) + tonumber(grace)
  redis.call('HSET', h, 'expires_at', expires, 'drop_at', fmt(drop_at))
  hd.drop_at = fmt(drop_at)
  redis.call('PEXPIREAT', h, fmt(math.ceil(drop_at / 1000) + tonumber(ttl)))
  expire_with_header(hd, DATA)
elseif hd.drop_at then
  expire_with_header(hd, TRANSCRIPT)
end
wake(14)
return {'ok', result}
