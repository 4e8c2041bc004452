#!lua
-- conv_append.lua as the role-sets layout shipped it (each record once, in the sorted set
-- of its role; no set of the turns, no layout mark in the header), its fragments
-- included: test_redis_layout.py writes that layout with it.
-- The store clock, number formatting and the key-header rule, shared by every script.
--
-- Header hash (KEYS[1] of every script on one conversation's keys), one field each:
--   owner, fence             the owning principal and the highest epoch seen
--   erased_at                the tombstone (then also erased_owner, tenant, session_id)
--   expires_at, drop_at      a temporary conversation's expiry, and the deadline at which
--                            the server drops its keys by itself (from then on the key is
--                            dead, like a tombstone)
--   shared:<principal>       one field per principal the conversation is shared with
--   tenant, session_id       the raw conversation key (key names hold only its digest)
--   last_write, last_result  nonce and result of the last write, for reconciling a reply
--                            lost with its connection
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- an integer as a decimal string (no exponent), and zero-padded to sort as text
local function fmt(n) return string.format('%.0f', n) end
local function pad(n) return string.format('%012.0f', n) end
-- a < b for canonical non-negative decimal strings (any size, byte-wise, locale-free)
local function decimal_lt(a, b)
  if #a ~= #b then return #a < #b end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return false
end
local function read_header(h)
  local v = redis.call('HMGET', h, 'owner', 'fence', 'erased_at', 'drop_at')
  return {key = h, owner = v[1], fence = v[2] or '0', erased_at = v[3], drop_at = v[4]}
end
-- whether anything was ever written under the key (a tombstone counts)
local function header_exists(hd) return (hd.owner ~= false) or (hd.erased_at ~= false) end
-- erased, or a temporary conversation past its drop deadline
local function is_dead(hd, now)
  if hd.erased_at then return true end
  if hd.drop_at and tonumber(hd.drop_at) <= now then return true end
  return false
end
-- the refusal of a write on a dead key: {'erased', until}, until (microseconds, store
-- clock) being when the key takes writes again: the header's native expiry (a tombstone's
-- erased_at + ttl, a temporary conversation's drop deadline), '' when it has none
local function erased_reply(hd)
  local at = redis.call('PEXPIRETIME', hd.key)
  if at > 0 then return {'erased', fmt(at * 1000)} end
  return {'erased', hd.drop_at or ''}
end
local function can_read(h, hd, now, principal)
  if not hd.owner or is_dead(hd, now) then return false end
  if hd.owner == principal then return true end
  return redis.call('HEXISTS', h, 'shared:' .. principal) == 1
end
-- the key-header rule of every write (erased, owner, fence): nil when allowed, else the
-- refusal reply
local function judge_write(hd, now, principal, epoch)
  if not header_exists(hd) then return nil end
  if is_dead(hd, now) then return erased_reply(hd) end
  if hd.owner ~= principal then return {'not_owned'} end
  if epoch ~= '' and decimal_lt(epoch, hd.fence) then return {'fenced', hd.fence} end
  return nil
end
-- claim an unowned key, raise the fence, remember this write's nonce and result
local function commit(h, hd, principal, tenant, session_id, epoch, nonce, result)
  local a = {'last_write', nonce, 'last_result', result}
  if not hd.owner then
    a[#a + 1] = 'owner'; a[#a + 1] = principal
    a[#a + 1] = 'tenant'; a[#a + 1] = tenant
    a[#a + 1] = 'session_id'; a[#a + 1] = session_id
  end
  if epoch ~= '' and decimal_lt(hd.fence, epoch) then
    a[#a + 1] = 'fence'; a[#a + 1] = epoch
  end
  redis.call('HSET', h, unpack(a))
end
-- the keys of a temporary conversation vanish by themselves at its drop deadline
local function expire_with_header(hd, keys)
  if hd.drop_at then
    local at = fmt(math.ceil(tonumber(hd.drop_at) / 1000))
    for _, k in ipairs(keys) do redis.call('PEXPIREAT', k, at) end
  end
end
-- Reading message records. A transcript's records are partitioned by role into three
-- sorted sets scored by seq (user, assistant, every other role), so a speaker's k-th
-- message and the recent turns are ZRANGE slices. Seqs are dense (0 .. count - 1) and
-- each is in exactly one of the three. A record is <created_us>|<len(id)>|<id><body>,
-- body being the JSON array [role, content, metadata, compaction] the adapter built.

-- created_us and message id of a record
local function record_parts(raw)
  local i = string.find(raw, '|', 1, true)
  local j = string.find(raw, '|', i + 1, true)
  local n = tonumber(string.sub(raw, i + 1, j - 1))
  return tonumber(string.sub(raw, 1, i - 1)), string.sub(raw, j + 1, j + n)
end
-- the role a record's body names
local function record_role(raw)
  local i = string.find(raw, '|', 1, true)
  local j = string.find(raw, '|', i + 1, true)
  local n = tonumber(string.sub(raw, i + 1, j - 1))
  return string.match(raw, '^%["([^"]*)"', j + n + 1)
end
-- flat {seq, record, ...}, ascending, of the records in the sorted sets zs whose seq is
-- within first .. last (numbers, or '+inf'): each set's slice, merged
local function records_between(zs, first, last)
  if type(first) == 'number' then first = fmt(first) end
  if type(last) == 'number' then last = fmt(last) end
  local lists, at = {}, {}
  for k, z in ipairs(zs) do
    lists[k] = redis.call('ZRANGE', z, first, last, 'BYSCORE', 'WITHSCORES')
    at[k] = 1
  end
  local out = {}
  while true do
    local best, best_seq = nil, nil
    for k = 1, #lists do
      local s = lists[k][at[k] + 1]
      if s then
        s = tonumber(s)
        if best_seq == nil or s < best_seq then best, best_seq = k, s end
      end
    end
    if best == nil then return out end
    out[#out + 1] = best_seq; out[#out + 1] = lists[best][at[best]]
    at[best] = at[best] + 2
  end
end
-- flat {position, record, ...} of a ZRANGE ... WITHSCORES reply, position = first + k - 1
local function numbered(reply, first)
  local out = {}
  for k = 1, #reply, 2 do
    out[#out + 1] = first + (k - 1) / 2; out[#out + 1] = reply[k]
  end
  return out
end
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
-- The previous layout: every record in legacy_records (a hash, seq -> record), and
-- user_records / assistant_records holding only the seqs of their role. A conversation
-- written by that version is converted in place, once: by the first write that touches
-- its transcript (append, truncate), or by conv_upgrade when a read finds it. Each record
-- moves into its role's sorted set, scored by its seq, and the hash goes; what a reader
-- sees does not change. Reads never convert (they cannot write): they reply 'legacy'.

-- whether the conversation still holds the previous layout
local function is_legacy() return redis.call('EXISTS', legacy_records) == 1 end
-- convert it (a no-op on the current layout); returns whether anything was converted
local function upgrade_layout()
  if not is_legacy() then return false end
  -- a member without '|' is a previous seq (a record always holds one)
  for _, z in ipairs({user_records, assistant_records}) do
    local seqs = {}
    for _, m in ipairs(redis.call('ZRANGE', z, 0, -1)) do
      if not string.find(m, '|', 1, true) then seqs[#seqs + 1] = m end
    end
    for i = 1, #seqs, 4000 do
      redis.call('ZREM', z, unpack(seqs, i, math.min(#seqs, i + 3999)))
    end
  end
  local pending = {{}, {}, {}}
  local slot = {[user_records] = 1, [assistant_records] = 2, [other_records] = 3}
  local all = redis.call('HGETALL', legacy_records)
  for i = 1, #all, 2 do
    local k = slot[records_of(record_role(all[i + 1]))]
    local batch = pending[k]
    batch[#batch + 1] = all[i]; batch[#batch + 1] = all[i + 1]
    if #batch >= 4000 then
      redis.call('ZADD', RECORDS[k], unpack(batch)); pending[k] = {}
    end
  end
  for k = 1, 3 do
    if #pending[k] > 0 then redis.call('ZADD', RECORDS[k], unpack(pending[k])) end
  end
  redis.call('DEL', legacy_records)
  -- a temporary conversation's new keys vanish with it, as the old ones would have
  expire_with_header(read_header(h), RECORDS)
  return true
end
-- Append messages, atomically and idempotently (ids already present are skipped).
-- KEYS: every key of the conversation. ARGV: nonce, principal, tenant, session_id,
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
return {'ok', result}
