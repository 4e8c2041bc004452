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
