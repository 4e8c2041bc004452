#!lua flags=no-writes
--! include header.lua
-- A conversation's metadata, as the principal sees it or (admin '1') as it is.
-- KEYS: header, meta. ARGV: principal, admin ('1'/'0').
-- Reply: {now, 'absent'}, {now, 'erased'} (admin), {now, 'expired', owner} (admin: dropped
-- by the server), or {now, 'ok', owner, created_at, updated_at, title, expires_at,
-- status, tail, count, {shared principals}, tenant, session_id, {metadata name, value, ...}}.
local h, meta = KEYS[1], KEYS[2]
local principal, admin = ARGV[1], ARGV[2]
local now = now_us()
local hd = read_header(h)
if admin == '1' then
  if not header_exists(hd) then return {fmt(now), 'absent'} end
  if hd.erased_at then return {fmt(now), 'erased'} end
  if is_dead(hd, now) then return {fmt(now), 'expired', hd.owner} end
elseif not can_read(h, hd, now, principal) then
  return {fmt(now), 'absent'}
end
local all_meta = redis.call('HGETALL', meta)
local md = {}
for i = 1, #all_meta, 2 do
  if string.sub(all_meta[i], 1, 3) == 'md:' then
    md[#md + 1] = string.sub(all_meta[i], 4); md[#md + 1] = all_meta[i + 1]
  end
end
local m = redis.call('HMGET', meta, 'created_at', 'updated_at', 'title', 'expires_at',
  'status', 'tail', 'count')
if not m[1] then return {fmt(now), 'absent'} end
local shared = {}
local all = redis.call('HGETALL', h)
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 7) == 'shared:' then shared[#shared + 1] = string.sub(all[i], 8) end
end
local raw_key = redis.call('HMGET', h, 'tenant', 'session_id')
return {fmt(now), 'ok', hd.owner, m[1], m[2], m[3], m[4], m[5], m[6], m[7], shared,
  raw_key[1], raw_key[2], md}
