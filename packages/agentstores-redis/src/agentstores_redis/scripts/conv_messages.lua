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
local now = now_us()
local hd = read_header(h)
if not can_read(h, hd, now, principal) then return {} end
local count = tonumber(redis.call('HGET', meta, 'count') or '0')
local seqs = {}
if mode == 'range' then
  local first, limit = tonumber(x), tonumber(y)
  local last = count - 1
  if limit >= 0 then last = math.min(last, first + limit - 1) end
  seqs = seq_range(first, last)
elseif mode == 'recent' then
  local k = tonumber(x)
  local both = {}
  for _, z in ipairs({user_seqs, assistant_seqs}) do
    for _, s in ipairs(redis.call('ZRANGE', z, -k, -1)) do both[#both + 1] = tonumber(s) end
  end
  table.sort(both)
  for i = math.max(1, #both - k + 1), #both do seqs[#seqs + 1] = both[i] end
else
  local c = redis.call('ZRANGE', compaction_seqs, -1, -1)
  local first = 0
  if #c > 0 then first = tonumber(c[1]) end
  seqs = seq_range(first, count - 1)
end
return labelled_records(messages, seqs, seqs)
