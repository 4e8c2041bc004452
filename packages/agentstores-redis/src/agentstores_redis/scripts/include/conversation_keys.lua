-- Every key of one conversation (the order of keys.CONV_PARTS), and the writes to them.
--
-- meta hash: count, tail (id of the last message), last_created (its created_us),
-- created_at, updated_at, status (last turn status), title, expires_at.
local h, meta, message_ids, messages = KEYS[1], KEYS[6], KEYS[7], KEYS[8]
local by_time, user_seqs, assistant_seqs, compaction_seqs = KEYS[9], KEYS[10], KEYS[11],
  KEYS[12]
-- every key but the header
local DATA = {KEYS[2], KEYS[3], KEYS[4], KEYS[5], meta, message_ids, messages, by_time,
  user_seqs, assistant_seqs, compaction_seqs}
-- the keys of the transcript
local TRANSCRIPT = {meta, message_ids, messages, by_time, user_seqs, assistant_seqs,
  compaction_seqs}
local function add_message(seq, created, id, role, compaction, body)
  local s = fmt(seq)
  redis.call('HSET', message_ids, id, s)
  redis.call('HSET', messages, s, fmt(created) .. '|' .. #id .. '|' .. id .. body)
  redis.call('ZADD', by_time, fmt(created), pad(seq))
  if role == 'user' then
    redis.call('ZADD', user_seqs, s, s)
  elseif role == 'assistant' then
    redis.call('ZADD', assistant_seqs, s, s)
  end
  if compaction == '1' then redis.call('ZADD', compaction_seqs, s, s) end
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
