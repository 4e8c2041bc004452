-- Reading message records. A record (messages hash, field = seq) is
-- <created_us>|<len(id)>|<id><body>, body being the JSON array
-- [role, content, metadata, compaction] the adapter built.

-- created_us and message id of a record
local function record_parts(raw)
  local i = string.find(raw, '|', 1, true)
  local j = string.find(raw, '|', i + 1, true)
  local n = tonumber(string.sub(raw, i + 1, j - 1))
  return tonumber(string.sub(raw, 1, i - 1)), string.sub(raw, j + 1, j + n)
end
-- the records of many seqs, in batches small enough for unpack()
local function records_at(messages, seqs)
  local out = {}
  local i = 1
  while i <= #seqs do
    local last = math.min(#seqs, i + 3999)
    local f = {}
    for s = i, last do f[#f + 1] = fmt(seqs[s]) end
    local v = redis.call('HMGET', messages, unpack(f))
    for s = 1, #v do out[#out + 1] = v[s] end
    i = last + 1
  end
  return out
end
-- flat {label, record, ...} for the seqs whose record exists
local function labelled_records(messages, seqs, labels)
  local records = records_at(messages, seqs)
  local out = {}
  for k = 1, #seqs do
    if records[k] then out[#out + 1] = fmt(labels[k]); out[#out + 1] = records[k] end
  end
  return out
end
local function seq_range(first, last)
  local s = {}
  for i = first, last do s[#s + 1] = i end
  return s
end
