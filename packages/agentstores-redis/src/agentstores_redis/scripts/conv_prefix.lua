#!lua flags=no-writes
--! include header.lua
--! include messages.lua
-- The title, the records up to and including a message and the metadata (what a branch
-- copies).
-- KEYS: header, meta, message_ids, legacy_records, user_records, assistant_records,
-- other_records. ARGV: principal, message_id.
-- Reply: {'ok', title or nil, {record, ...}, {metadata name, value, ...}}, {'not_found'},
-- {'no_message'} or {'legacy'} (the previous layout: convert, then read again).
local h, meta, message_ids, legacy_records = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local records = {KEYS[5], KEYS[6], KEYS[7]}
local principal, message_id = ARGV[1], ARGV[2]
local now = now_us()
local hd = read_header(h)
if not can_read(h, hd, now, principal) or redis.call('EXISTS', meta) == 0 then
  return {'not_found'}
end
local seq = redis.call('HGET', message_ids, message_id)
if not seq then return {'no_message'} end
if redis.call('EXISTS', legacy_records) == 1 then return {'legacy'} end
local found = records_between(records, 0, tonumber(seq))
local prefix = {}
for k = 2, #found, 2 do prefix[#prefix + 1] = found[k] end
local md = {}
local all = redis.call('HGETALL', meta)
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 3) == 'md:' then
    md[#md + 1] = string.sub(all[i], 4); md[#md + 1] = all[i + 1]
  end
end
return {'ok', redis.call('HGET', meta, 'title'), prefix, md}
