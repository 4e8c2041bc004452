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
