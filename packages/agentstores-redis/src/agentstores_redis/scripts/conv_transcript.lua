#!lua flags=no-writes
--! include header.lua
--! include messages.lua
-- Transcript messages with their positions (among all, or among one speaker's).
-- KEYS: header, meta, legacy_records, by_time, user_records, assistant_records,
-- other_records.
-- ARGV: principal, speaker ('user', 'assistant' or anything else for all), mode
-- ('index', speaker all only: arg is the position, negative from the end; 'time':
-- t0..t1 created_us; else all), arg, t0, t1, limit (-1 none).
-- Reply: flat {position, record, ...}; {} when invisible; {'legacy'} for the previous
-- layout (convert, then read again).
local h, meta, legacy_records, by_time = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local user_records, assistant_records = KEYS[5], KEYS[6]
local records = {user_records, assistant_records, KEYS[7]}
local principal, speaker, mode, arg, t0, t1, limit = unpack(ARGV, 1, 7)
limit = tonumber(limit)
local hd = read_header(h)
-- the clock matters only to a temporary conversation (its drop deadline)
local now = hd.drop_at and now_us() or 0
if not can_read(h, hd, now, principal) then return {} end
if redis.call('EXISTS', legacy_records) == 1 then return {'legacy'} end
-- one speaker's view is its own sorted set, where a position is a rank
local z = nil
if speaker == 'user' then z = user_records elseif speaker == 'assistant' then
  z = assistant_records end
if mode == 'index' then
  -- (one speaker's message by index is a plain read, in conversations.py)
  if z ~= nil then return redis.error_reply('index mode reads the whole transcript') end
  local i = tonumber(arg)
  local n = tonumber(redis.call('HGET', meta, 'count') or '0')
  if i < 0 then i = n + i end
  if i < 0 or i >= n then return {} end
  return records_between(records, i, i)
elseif mode == 'time' then
  local f = redis.call('ZRANGEBYSCORE', by_time, t0, t1, 'LIMIT', 0, 1)
  if #f == 0 then return {} end
  local l = redis.call('ZREVRANGEBYSCORE', by_time, t1, t0, 'LIMIT', 0, 1)
  local fs, ls = tonumber(f[1]), tonumber(l[1])
  if z == nil then
    if limit >= 0 then ls = math.min(ls, fs + limit - 1) end
    return records_between(records, fs, ls)
  end
  local r
  if limit >= 0 then
    r = redis.call('ZRANGE', z, fmt(fs), fmt(ls), 'BYSCORE', 'LIMIT', 0, limit, 'WITHSCORES')
  else
    r = redis.call('ZRANGE', z, fmt(fs), fmt(ls), 'BYSCORE', 'WITHSCORES')
  end
  return numbered(r, redis.call('ZCOUNT', z, '-inf', '(' .. fmt(fs)))
end
if z == nil then
  local last = '+inf'
  if limit >= 0 then last = limit - 1 end
  return records_between(records, 0, last)
end
return numbered(redis.call('ZRANGE', z, 0, limit >= 0 and limit - 1 or -1, 'WITHSCORES'), 0)
