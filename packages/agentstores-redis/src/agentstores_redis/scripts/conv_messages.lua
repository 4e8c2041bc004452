#!lua flags=no-writes
--! include header.lua
--! include messages.lua
-- Stored messages by seq. KEYS: header, meta, messages, user_seqs, assistant_seqs,
-- compaction_seqs. ARGV: principal, mode ('range': x first seq, y limit or -1;
-- 'recent': the last x user/assistant messages; else 'history': from the latest
-- compaction on), x, y. Reply: flat {seq, record, ...}; {} when invisible.
local h, meta, messages = KEYS[1], KEYS[2], KEYS[3]
local user_seqs, assistant_seqs, compaction_seqs = KEYS[4], KEYS[5], KEYS[6]
local principal, mode, x, y = unpack(ARGV, 1, 4)
local hd = read_header(h)
-- the clock matters only to a temporary conversation (its drop deadline)
local now = hd.drop_at and now_us() or 0
if not can_read(h, hd, now, principal) then return {} end
local function count() return tonumber(redis.call('HGET', meta, 'count') or '0') end
local seqs = {}
if mode == 'range' then
  local first, limit = tonumber(x), tonumber(y)
  local last = count() - 1
  if limit >= 0 then last = math.min(last, first + limit - 1) end
  seqs = seq_range(first, last)
elseif mode == 'recent' then
  -- the last k of the two speakers' ascending seqs, merged from their ends; the seqs
  -- stay the members' strings, as HMGET and the reply take them
  local k = tonumber(x)
  local u = redis.call('ZRANGE', user_seqs, -k, -1)
  local a = redis.call('ZRANGE', assistant_seqs, -k, -1)
  local i, j, n = #u, #a, math.min(k, #u + #a)
  local ui, aj = u[i] and tonumber(u[i]), a[j] and tonumber(a[j])
  local fields = {}
  for slot = n, 1, -1 do
    if aj == nil or (ui ~= nil and ui > aj) then
      fields[slot] = u[i]; i = i - 1; ui = u[i] and tonumber(u[i])
    else
      fields[slot] = a[j]; j = j - 1; aj = a[j] and tonumber(a[j])
    end
  end
  local out = {}
  for first = 1, n, 4000 do  -- batches small enough for unpack()
    local last = math.min(n, first + 3999)
    local records = redis.call('HMGET', messages, unpack(fields, first, last))
    for s = first, last do
      local r = records[s - first + 1]
      if r then out[#out + 1] = fields[s]; out[#out + 1] = r end
    end
  end
  return out
else
  local c = redis.call('ZRANGE', compaction_seqs, -1, -1)
  local first = 0
  if #c > 0 then first = tonumber(c[1]) end
  seqs = seq_range(first, count() - 1)
end
return labelled_records(messages, seqs, seqs)
