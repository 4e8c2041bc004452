-- The store clock, number formatting and the key-header rule, shared by every script.
--
-- Header hash (KEYS[1] of every script on one conversation's keys), one field each:
--   owner, fence             the owning principal and the highest epoch seen
--   erased_at                the tombstone (then also erased_owner, tenant, session_id)
--   expires_at, drop_at      a temporary conversation's expiry, and the deadline at which
--                            the server drops its keys by itself (from then on the key is
--                            dead, like a tombstone)
--   shared:<principal>       one field per principal the conversation is shared with
--   tenant, session_id       the raw conversation key (key names hold only its digest)
--   last_write, last_result  nonce and result of the last write, for reconciling a reply
--                            lost with its connection
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- an integer as a decimal string (no exponent), and zero-padded to sort as text
local function fmt(n) return string.format('%.0f', n) end
local function pad(n) return string.format('%012.0f', n) end
-- a < b for canonical non-negative decimal strings (any size, byte-wise, locale-free)
local function decimal_lt(a, b)
  if #a ~= #b then return #a < #b end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return false
end
local function read_header(h)
  local v = redis.call('HMGET', h, 'owner', 'fence', 'erased_at', 'drop_at')
  return {key = h, owner = v[1], fence = v[2] or '0', erased_at = v[3], drop_at = v[4]}
end
-- whether anything was ever written under the key (a tombstone counts)
local function header_exists(hd) return (hd.owner ~= false) or (hd.erased_at ~= false) end
-- erased, or a temporary conversation past its drop deadline
local function is_dead(hd, now)
  if hd.erased_at then return true end
  if hd.drop_at and tonumber(hd.drop_at) <= now then return true end
  return false
end
-- the refusal of a write on a dead key: {'erased', until}, until (microseconds, store
-- clock) being when the key takes writes again: the header's native expiry (a tombstone's
-- erased_at + ttl, a temporary conversation's drop deadline), '' when it has none
local function erased_reply(hd)
  local at = redis.call('PEXPIRETIME', hd.key)
  if at > 0 then return {'erased', fmt(at * 1000)} end
  return {'erased', hd.drop_at or ''}
end
local function can_read(h, hd, now, principal)
  if not hd.owner or is_dead(hd, now) then return false end
  if hd.owner == principal then return true end
  return redis.call('HEXISTS', h, 'shared:' .. principal) == 1
end
-- the key-header rule of every write (erased, owner, fence): nil when allowed, else the
-- refusal reply
local function judge_write(hd, now, principal, epoch)
  if not header_exists(hd) then return nil end
  if is_dead(hd, now) then return erased_reply(hd) end
  if hd.owner ~= principal then return {'not_owned'} end
  if epoch ~= '' and decimal_lt(epoch, hd.fence) then return {'fenced', hd.fence} end
  return nil
end
-- claim an unowned key, raise the fence, remember this write's nonce and result
local function commit(h, hd, principal, tenant, session_id, epoch, nonce, result)
  local a = {'last_write', nonce, 'last_result', result}
  if not hd.owner then
    a[#a + 1] = 'owner'; a[#a + 1] = principal
    a[#a + 1] = 'tenant'; a[#a + 1] = tenant
    a[#a + 1] = 'session_id'; a[#a + 1] = session_id
  end
  if epoch ~= '' and decimal_lt(hd.fence, epoch) then
    a[#a + 1] = 'fence'; a[#a + 1] = epoch
  end
  redis.call('HSET', h, unpack(a))
end
-- the keys of a temporary conversation vanish by themselves at its drop deadline
local function expire_with_header(hd, keys)
  if hd.drop_at then
    local at = fmt(math.ceil(tonumber(hd.drop_at) / 1000))
    for _, k in ipairs(keys) do redis.call('PEXPIREAT', k, at) end
  end
end
