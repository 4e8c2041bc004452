#!lua flags=no-writes
--! include header.lua
--! include messages.lua
-- Transcript messages with their positions (among all, or among one speaker's).
-- KEYS: header, meta, messages, by_time, user_seqs, assistant_seqs.
-- ARGV: principal, speaker ('user', 'assistant' or anything else for all), mode
-- ('index': arg is the position, negative from the end; 'time': t0..t1 created_us;
-- else all), arg, t0, t1, limit (-1 none).
-- Reply: flat {position, record, ...}; {} when invisible.
local h, meta, messages, by_time = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local user_seqs, assistant_seqs = KEYS[5], KEYS[6]
local principal, speaker, mode, arg, t0, t1, limit = unpack(ARGV, 1, 7)
limit = tonumber(limit)
local hd = read_header(h)
-- the clock matters only to a temporary conversation (its drop deadline)
local now = hd.drop_at and now_us() or 0
if not can_read(h, hd, now, principal) then return {} end
-- read only by the views that need it (a speaker's view counts its own sorted set)
local function count() return tonumber(redis.call('HGET', meta, 'count') or '0') end
local z = nil
if speaker == 'user' then z = user_seqs elseif speaker == 'assistant' then z = assistant_seqs end
local seqs, positions = {}, {}
if mode == 'index' then
  local i = tonumber(arg)
  if z == nil then
    local n = count()
    if i < 0 then i = n + i end
    if i < 0 or i >= n then return {} end
    seqs[1] = i; positions[1] = i
  else
    local r = redis.call('ZRANGE', z, arg, arg)
    if #r == 0 then return {} end
    if i < 0 then i = redis.call('ZCARD', z) + i end
    seqs[1] = tonumber(r[1]); positions[1] = i
  end
elseif mode == 'time' then
  local f = redis.call('ZRANGEBYSCORE', by_time, t0, t1, 'LIMIT', 0, 1)
  if #f == 0 then return {} end
  local l = redis.call('ZREVRANGEBYSCORE', by_time, t1, t0, 'LIMIT', 0, 1)
  local fs, ls = tonumber(f[1]), tonumber(l[1])
  if z == nil then
    if limit >= 0 then ls = math.min(ls, fs + limit - 1) end
    for s = fs, ls do seqs[#seqs + 1] = s; positions[#positions + 1] = s end
  else
    local r
    if limit >= 0 then
      r = redis.call('ZRANGEBYSCORE', z, fmt(fs), fmt(ls), 'LIMIT', 0, limit)
    else
      r = redis.call('ZRANGEBYSCORE', z, fmt(fs), fmt(ls))
    end
    local base = redis.call('ZCOUNT', z, '-inf', '(' .. fmt(fs))
    for k, s in ipairs(r) do seqs[k] = tonumber(s); positions[k] = base + k - 1 end
  end
else
  if z == nil then
    local last = count() - 1
    if limit >= 0 then last = math.min(last, limit - 1) end
    for s = 0, last do seqs[#seqs + 1] = s; positions[#positions + 1] = s end
  else
    local r = redis.call('ZRANGE', z, 0, limit >= 0 and limit - 1 or -1)
    for k, s in ipairs(r) do seqs[k] = tonumber(s); positions[k] = k - 1 end
  end
end
return labelled_records(messages, seqs, positions)
