#!lua
--! include header.lua
--! include messages.lua
--! include conversation_keys.lua
--! include wake.lua
--! include legacy_layout.lua
-- Truncate at a message: everything after it goes, and the message itself by the cut
-- ('by_role': a user message goes, any other stays; 'before': it goes; 'after': it
-- stays), only while the tail is the expected one when one is given. KEYS: every key of
-- the conversation, [wake channel]. ARGV: nonce, principal, tenant, session_id, message_id, epoch, cut,
-- expected tail ('' = no condition).
-- Reply: {'ok', removed, updated_us}, {'no_message'}, {'stale_tail', tail} or a refusal.
local nonce, principal, tenant, session_id, message_id, epoch, mode, expected =
  unpack(ARGV, 1, 8)
local now = now_us()
local hd = read_header(h)
local refusal = judge_existing(hd, now, principal, epoch)
if refusal then return refusal end
if expected ~= '' then
  local tail = redis.call('HGET', meta, 'tail')
  if tail ~= expected then return {'stale_tail', tail or ''} end
end
local seq = redis.call('HGET', message_ids, message_id)
if not seq then return {'no_message'} end
upgrade_layout()
seq = tonumber(seq)
local cut = seq
if mode == 'after' then
  cut = seq + 1
elseif mode ~= 'before' then
  -- by role: the converted layout keeps each record in its role's set
  if #redis.call('ZRANGE', user_records, fmt(seq), fmt(seq), 'BYSCORE') == 0 then cut = seq + 1 end
end
local count = tonumber(redis.call('HGET', meta, 'count') or '0')
local removed = 0
if cut < count then
  for _, z in ipairs(RECORDS) do
    for _, raw in ipairs(redis.call('ZRANGE', z, fmt(cut), '+inf', 'BYSCORE')) do
      local _, id = record_parts(raw)
      redis.call('HDEL', message_ids, id)
    end
    redis.call('ZREMRANGEBYSCORE', z, fmt(cut), '+inf')
  end
  for s = cut, count - 1 do redis.call('ZREM', by_time, pad(s)) end
  redis.call('ZREMRANGEBYSCORE', compaction_seqs, fmt(cut), '+inf')
  removed = count - cut
end
local updated = touched_at(now)
local fields = {'count', fmt(cut), 'updated_at', fmt(updated)}
if cut == 0 then
  redis.call('HDEL', meta, 'tail', 'last_created')
else
  local created, id = record_parts(records_between(RECORDS, cut - 1, cut - 1)[2])
  fields[#fields + 1] = 'tail'; fields[#fields + 1] = id
  fields[#fields + 1] = 'last_created'; fields[#fields + 1] = fmt(created)
end
redis.call('HSET', meta, unpack(fields))
commit(h, hd, principal, tenant, session_id, epoch, nonce, fmt(removed) .. '|' .. fmt(updated))
wake(14)
return {'ok', fmt(removed), fmt(updated)}
