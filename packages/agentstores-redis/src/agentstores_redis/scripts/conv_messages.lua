#!lua flags=no-writes
--! include header.lua
--! include messages.lua
-- Stored messages by seq. KEYS: header, meta, legacy_records, user_records,
-- assistant_records, other_records, compaction_seqs. ARGV: principal, mode ('range': x
-- first seq, y limit or -1; else 'history': from the latest compaction on), x, y.
-- (recent() is a MULTI/EXEC of plain reads, in conversations.py.)
-- Reply: flat {seq, record, ...}; {} when invisible; {'legacy'} for the previous layout
-- (convert, then read again).
local h, legacy_records = KEYS[1], KEYS[3]
local records, compaction_seqs = {KEYS[4], KEYS[5], KEYS[6]}, KEYS[7]
local principal, mode, x, y = unpack(ARGV, 1, 4)
local hd = read_header(h)
-- the clock matters only to a temporary conversation (its drop deadline)
local now = hd.drop_at and now_us() or 0
if not can_read(h, hd, now, principal) then return {} end
if redis.call('EXISTS', legacy_records) == 1 then return {'legacy'} end
if mode == 'range' then
  local first, limit = tonumber(x), tonumber(y)
  local last = '+inf'
  if limit >= 0 then last = first + limit - 1 end
  return records_between(records, first, last)
end
local c = redis.call('ZRANGE', compaction_seqs, -1, -1)
local first = 0
if #c > 0 then first = tonumber(c[1]) end
return records_between(records, first, '+inf')
