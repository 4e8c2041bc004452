-- Every key of one conversation (the order of keys.CONV_PARTS), and the writes to them.
--
-- meta hash: count, tail (id of the last message), last_created (its created_us),
-- created_at, updated_at, status (last turn status), title, expires_at, and per name of
-- the conversation metadata 'md:<name>' holding its value's canonical JSON.
-- The records (see messages.lua) are in user_records, assistant_records and
-- other_records, by role, scored by seq; legacy_records is the previous layout's
-- (legacy_layout.lua).
local h, meta, message_ids, legacy_records = KEYS[1], KEYS[6], KEYS[7], KEYS[8]
local by_time, user_records, assistant_records, compaction_seqs = KEYS[9], KEYS[10],
  KEYS[11], KEYS[12]
local other_records = KEYS[13]
local RECORDS = {user_records, assistant_records, other_records}
-- every key but the header
local DATA = {KEYS[2], KEYS[3], KEYS[4], KEYS[5], meta, message_ids, legacy_records, by_time,
  user_records, assistant_records, compaction_seqs, other_records}
-- the keys of the transcript
local TRANSCRIPT = {meta, message_ids, legacy_records, by_time, user_records,
  assistant_records, compaction_seqs, other_records}
-- the sorted set holding the records of a role
local function records_of(role)
  if role == 'user' then return user_records end
  if role == 'assistant' then return assistant_records end
  return other_records
end
local function add_message(seq, created, id, role, compaction, body)
  local s = fmt(seq)
  redis.call('HSET', message_ids, id, s)
  redis.call('ZADD', records_of(role), s, fmt(created) .. '|' .. #id .. '|' .. id .. body)
  redis.call('ZADD', by_time, fmt(created), pad(seq))
  if compaction == '1' then redis.call('ZADD', compaction_seqs, s, s) end
end
-- The conversation metadata as a flat {name, value, ...} list.
local function md_list()
  local out = {}
  local all = redis.call('HGETALL', meta)
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, 3) == 'md:' then
      out[#out + 1] = string.sub(all[i], 4); out[#out + 1] = all[i + 1]
    end
  end
  return out
end
-- The refusal of merging the n (name, value) pairs of ARGV from index first ('' value:
-- remove the name) when the names' and values' bytes would then sum above max, else nil.
local function md_refusal(first, n, max)
  local sizes = {}
  local current = md_list()
  for i = 1, #current, 2 do sizes[current[i]] = #current[i + 1] end
  for i = 0, n - 1 do
    local name, value = ARGV[first + 2 * i], ARGV[first + 2 * i + 1]
    if value == '' then sizes[name] = nil else sizes[name] = #value end
  end
  local size = 0
  for name, len in pairs(sizes) do size = size + #name + len end
  if size > tonumber(max) then return {'too_big', fmt(size)} end
  return nil
end
-- Merge them (after md_refusal said nil).
local function md_apply(first, n)
  for i = 0, n - 1 do
    local name, value = ARGV[first + 2 * i], ARGV[first + 2 * i + 1]
    if value == '' then
      redis.call('HDEL', meta, 'md:' .. name)
    else
      redis.call('HSET', meta, 'md:' .. name, value)
    end
  end
end
-- the write rule on a conversation that must exist: erased, absent, then the header rule
local function judge_existing(hd, now, principal, epoch)
  if header_exists(hd) and is_dead(hd, now) then return erased_reply(hd) end
  if redis.call('EXISTS', meta) == 0 then return {'not_found'} end
  return judge_write(hd, now, principal, epoch)
end
-- the conversation's new updated_at: now, never below the stored one
local function touched_at(now)
  local updated = redis.call('HGET', meta, 'updated_at')
  if updated and tonumber(updated) > now then return tonumber(updated) end
  return now
end
