"""The Lua scripts: one per mutating operation, plus the reads that need a consistent view.

Every script touches only keys passed in ``KEYS`` that share one hash tag, so it runs
unchanged on a cluster. Writing scripts start with ``#!lua`` (the server refuses them
whole when out of memory, instead of failing half-way) and check everything (tombstone,
owner, fence, preconditions) before their first write, because Redis does not roll a
script back. Times come from ``TIME`` inside the script, in microseconds.

Header fields (``KEYS[1]`` of every conversation script): ``o`` owner, ``f`` fence,
``e`` erased-at (tombstone), ``x`` expires-at of a temporary conversation and ``xd``
the deadline at which the server drops it natively (from then on the key is dead, like
a tombstone), ``s:<principal>`` shares, ``tn``/``sd`` the raw
tenant and session id, ``lw``/``lr`` nonce and result of the last write (for
reconciling a reply lost with its connection).

Message record (``msg`` hash, field = seq): ``<created_us>|<len(id)>|<id><body>`` where
body is the JSON array ``[role, content, metadata, compaction]`` built by the adapter.
"""

from __future__ import annotations

from .client import Script

PRELUDE = r"""
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function fmt(n) return string.format('%.0f', n) end
local function pad(n) return string.format('%012.0f', n) end
-- a < b for canonical non-negative decimal strings (any size, byte-wise, locale-free)
local function lt(a, b)
  if #a ~= #b then return #a < #b end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return false
end
local function head(h)
  local v = redis.call('HMGET', h, 'o', 'f', 'e', 'xd')
  return {o = v[1], f = v[2] or '0', e = v[3], xd = v[4]}
end
local function exists(hd) return (hd.o ~= false) or (hd.e ~= false) end
local function dead(hd, now)
  if hd.e then return true end
  if hd.xd and tonumber(hd.xd) <= now then return true end
  return false
end
local function visible(h, hd, now, p)
  if not hd.o or dead(hd, now) then return false end
  if hd.o == p then return true end
  return redis.call('HEXISTS', h, 's:' .. p) == 1
end
-- the write check of every store: nil when allowed, else the error reply
local function check(hd, now, p, epoch)
  if not exists(hd) then return nil end
  if dead(hd, now) then return {'erased'} end
  if hd.o ~= p then return {'notowned'} end
  if epoch ~= '' and lt(epoch, hd.f) then return {'fenced', hd.f} end
  return nil
end
-- claim an unowned key, raise the fence, remember this write's nonce and result
local function commit(h, hd, p, tn, sd, epoch, nonce, lr)
  local a = {'lw', nonce, 'lr', lr}
  if not hd.o then
    a[#a + 1] = 'o'; a[#a + 1] = p; a[#a + 1] = 'tn'; a[#a + 1] = tn
    a[#a + 1] = 'sd'; a[#a + 1] = sd
  end
  if epoch ~= '' and lt(hd.f, epoch) then a[#a + 1] = 'f'; a[#a + 1] = epoch end
  redis.call('HSET', h, unpack(a))
end
-- keys of a temporary conversation vanish by themselves at its deadline 'xd'
local function expire(hd, keys)
  if hd.xd then
    local at = fmt(math.ceil(tonumber(hd.xd) / 1000))
    for _, k in ipairs(keys) do redis.call('PEXPIREAT', k, at) end
  end
end
local function rec_parts(raw)
  local i = string.find(raw, '|', 1, true)
  local j = string.find(raw, '|', i + 1, true)
  local n = tonumber(string.sub(raw, i + 1, j - 1))
  return tonumber(string.sub(raw, 1, i - 1)), string.sub(raw, j + 1, j + n)
end
local function hmget_seqs(k, seqs)
  local out = {}
  local i = 1
  while i <= #seqs do
    local last = math.min(#seqs, i + 3999)
    local f = {}
    for s = i, last do f[#f + 1] = fmt(seqs[s]) end
    local v = redis.call('HMGET', k, unpack(f))
    for s = 1, #v do out[#out + 1] = v[s] end
    i = last + 1
  end
  return out
end
local function seq_range(first, last)
  local s = {}
  for i = first, last do s[#s + 1] = i end
  return s
end
"""

WRITE = "#!lua\n"
READ = "#!lua flags=no-writes\n"


def _script(name: str, body: str, *, write: bool) -> Script:
    return Script(name, (WRITE if write else READ) + PRELUDE + body, write=write)


# --- supervision ---------------------------------------------------------------------

SV_CAS = _script(
    "sv_cas",
    r"""
local h, sv = KEYS[1], KEYS[2]
local nonce, p, tn, sd, expected, status, mid, epoch = unpack(ARGV, 1, 8)
local now = now_us()
local hd = head(h)
if exists(hd) then
  if dead(hd, now) then return {'ok', '0'} end
  if hd.o ~= p then return {'notowned'} end
  if lt(epoch, hd.f) then return {'ok', '0'} end
end
local cur = redis.call('HGET', sv, 'ep')
if expected == '' then
  if cur then return {'ok', '0'} end
elseif cur ~= expected then
  return {'ok', '0'}
end
redis.call('HSET', sv, 'st', status, 'mid', mid, 'ep', epoch, 'hb', fmt(now))
commit(h, hd, p, tn, sd, epoch, nonce, '1')
expire(hd, {sv})
return {'ok', '1'}
""",
    write=True,
)

SV_READ = _script(
    "sv_read",
    r"""
local now = now_us()
local hd = head(KEYS[1])
if not visible(KEYS[1], hd, now, ARGV[1]) then return {fmt(now)} end
local r = redis.call('HMGET', KEYS[2], 'st', 'mid', 'ep', 'hb')
return {fmt(now), hd.f, hd.o, r[1], r[2], r[3], r[4]}
""",
    write=False,
)

SV_DELETE = _script(
    "sv_delete",
    r"""
local h, sv = KEYS[1], KEYS[2]
local nonce, p, mid, epoch = unpack(ARGV, 1, 4)
local now = now_us()
local hd = head(h)
if not exists(hd) or dead(hd, now) then return {'ok', '0'} end
if hd.o ~= p then return {'notowned'} end
local r = redis.call('HMGET', sv, 'mid', 'ep')
if r[1] ~= mid or r[2] ~= epoch then return {'ok', '0'} end
redis.call('DEL', sv)
redis.call('HSET', h, 'lw', nonce, 'lr', '1')
return {'ok', '1'}
""",
    write=True,
)

# --- recording -----------------------------------------------------------------------

REC_PUT = _script(
    "rec_put",
    r"""
local h, rec = KEYS[1], KEYS[2]
local nonce, p, tn, sd, index, message, mid, epoch = unpack(ARGV, 1, 8)
local now = now_us()
local hd = head(h)
local err = check(hd, now, p, epoch)
if err then return err end
local r = redis.call('HMGET', rec, 'ix', 'mid', 'ep')
if r[3] then
  if lt(epoch, r[3]) then return {'fenced', r[3]} end
  if r[2] == mid and r[3] == epoch and lt(index, r[1]) then return {'ok', '0'} end
end
redis.call('HSET', rec, 'ix', index, 'msg', message, 'mid', mid, 'ep', epoch)
commit(h, hd, p, tn, sd, epoch, nonce, '1')
expire(hd, {rec})
return {'ok', '1'}
""",
    write=True,
)

REC_READ = _script(
    "rec_read",
    r"""
local now = now_us()
local hd = head(KEYS[1])
if not visible(KEYS[1], hd, now, ARGV[1]) then return {} end
return redis.call('HMGET', KEYS[2], 'ix', 'msg', 'mid', 'ep')
""",
    write=False,
)

REC_DELETE = _script(
    "rec_delete",
    r"""
local h, rec = KEYS[1], KEYS[2]
local nonce, p, tn, sd, mid, epoch = unpack(ARGV, 1, 6)
local now = now_us()
local hd = head(h)
if not exists(hd) then return {'ok', '0'} end
local err = check(hd, now, p, epoch)
if err then return err end
local res = '0'
if redis.call('HGET', rec, 'mid') == mid then
  redis.call('DEL', rec)
  res = '1'
end
commit(h, hd, p, tn, sd, epoch, nonce, res)
return {'ok', res}
""",
    write=True,
)

# --- agent state ---------------------------------------------------------------------

ST_SAVE = _script(
    "st_save",
    r"""
local h, st = KEYS[1], KEYS[2]
local nonce, p, tn, sd, blob, epoch = unpack(ARGV, 1, 6)
local now = now_us()
local hd = head(h)
local err = check(hd, now, p, epoch)
if err then return err end
redis.call('SET', st, blob)
commit(h, hd, p, tn, sd, epoch, nonce, '1')
expire(hd, {st})
return {'ok', '1'}
""",
    write=True,
)

ST_LOAD = _script(
    "st_load",
    r"""
local now = now_us()
local hd = head(KEYS[1])
if not visible(KEYS[1], hd, now, ARGV[1]) then return {} end
return {redis.call('GET', KEYS[2])}
""",
    write=False,
)

ST_DELETE = _script(
    "st_delete",
    r"""
local h, st = KEYS[1], KEYS[2]
local nonce, p, tn, sd, epoch = unpack(ARGV, 1, 5)
local now = now_us()
local hd = head(h)
if not exists(hd) then return {'ok', '0'} end
local err = check(hd, now, p, epoch)
if err then return err end
redis.call('DEL', st)
commit(h, hd, p, tn, sd, epoch, nonce, '1')
return {'ok', '1'}
""",
    write=True,
)

# --- pause tokens --------------------------------------------------------------------
# token record: <status P|C|A>|<expires_us>|<claim nonce>|<payload json>

TOKEN_PRELUDE = r"""
local function token(raw)
  local i = string.find(raw, '|', 3, true)
  local j = string.find(raw, '|', i + 1, true)
  return string.sub(raw, 1, 1), string.sub(raw, 3, i - 1), string.sub(raw, i + 1, j - 1),
    string.sub(raw, j + 1)
end
local function token_owner_ok(h, p, now)
  local hd = head(h)
  return hd.o and not dead(hd, now) and hd.o == p
end
"""

PT_PUT = _script(
    "pt_put",
    r"""
local h, pt = KEYS[1], KEYS[2]
local nonce, p, tn, sd, tid, payload, exp, epoch = unpack(ARGV, 1, 8)
local now = now_us()
local hd = head(h)
local err = check(hd, now, p, epoch)
if err then return err end
if redis.call('HEXISTS', pt, tid) == 1 then return {'conflict'} end
redis.call('HSET', pt, tid, 'P|' .. exp .. '||' .. payload)
commit(h, hd, p, tn, sd, epoch, nonce, '1')
expire(hd, {pt})
return {'ok', '1'}
""",
    write=True,
)

PT_CLAIM = _script(
    "pt_claim",
    TOKEN_PRELUDE
    + r"""
local h, pt = KEYS[1], KEYS[2]
local nonce, p, tid = unpack(ARGV, 1, 3)
local now = now_us()
if not token_owner_ok(h, p, now) then return {'notfound'} end
local raw = redis.call('HGET', pt, tid)
if not raw then return {'notfound'} end
local st, exp, cn, payload = token(raw)
if st ~= 'P' then return {'claimed', st} end
if tonumber(exp) <= now then return {'expired'} end
redis.call('HSET', pt, tid, 'C|' .. exp .. '|' .. nonce .. '|' .. payload)
return {'ok', payload}
""",
    write=True,
)

PT_ABANDON = _script(
    "pt_abandon",
    TOKEN_PRELUDE
    + r"""
local h, pt = KEYS[1], KEYS[2]
local nonce, p, tid = unpack(ARGV, 1, 3)
local now = now_us()
if not token_owner_ok(h, p, now) then return {'notfound'} end
local raw = redis.call('HGET', pt, tid)
if not raw then return {'notfound'} end
local st, exp, cn, payload = token(raw)
redis.call('HSET', pt, tid, 'A|' .. exp .. '|' .. cn .. '|' .. payload)
return {'ok', '1'}
""",
    write=True,
)

PT_RECONCILE = _script(
    "pt_reconcile",
    TOKEN_PRELUDE
    + r"""
local raw = redis.call('HGET', KEYS[2], ARGV[1])
if not raw then return {'unknown'} end
local st, exp, cn, payload = token(raw)
if st == 'C' and cn == ARGV[2] then return {'ok', payload} end
return {'unknown'}
""",
    write=False,
)

RECONCILE = _script(
    "reconcile",
    r"""
local v = redis.call('HMGET', KEYS[1], 'lw', 'lr')
if v[1] == ARGV[1] then return {'ok', v[2]} end
return {'unknown'}
""",
    write=False,
)

# --- conversations -------------------------------------------------------------------
# KEYS for every conversation script: h sv rec st pt m ids msg t u a cp (keys.CONV_PARTS)

CONV_KEYS = r"""
local h, m, ids, msg, t, u, a, cp = KEYS[1], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10],
  KEYS[11], KEYS[12]
local DATA = {KEYS[2], KEYS[3], KEYS[4], KEYS[5], m, ids, msg, t, u, a, cp}
local function add_message(seq, ts, id, role, comp, body)
  local s = fmt(seq)
  redis.call('HSET', ids, id, s)
  redis.call('HSET', msg, s, fmt(ts) .. '|' .. #id .. '|' .. id .. body)
  redis.call('ZADD', t, fmt(ts), pad(seq))
  if role == 'user' then
    redis.call('ZADD', u, s, s)
  elseif role == 'assistant' then
    redis.call('ZADD', a, s, s)
  end
  if comp == '1' then redis.call('ZADD', cp, s, s) end
end
local function touch(now)
  local up = redis.call('HGET', m, 'up')
  if up and tonumber(up) > now then return tonumber(up) end
  return now
end
"""

CONV_APPEND = _script(
    "conv_append",
    CONV_KEYS
    + r"""
local nonce, p, tn, sd, create, status, mode, expected, epoch, title, exp, ttl, grace =
  unpack(ARGV, 1, 13)
local n = tonumber(ARGV[14])
local now = now_us()
local hd = head(h)
if exists(hd) and dead(hd, now) then return {'erased'} end
local have = redis.call('EXISTS', m) == 1
if not have and create == '0' then return {'notfound'} end
local err = check(hd, now, p, epoch)
if err then return err end
local fresh = {}
for i = 0, n - 1 do
  if redis.call('HEXISTS', ids, ARGV[15 + 4 * i]) == 0 then fresh[#fresh + 1] = i end
end
if n > 0 and #fresh == 0 then return {'noop'} end
local meta = {false, false, false, false}
if have then meta = redis.call('HMGET', m, 'tail', 'n', 'ls', 'up') end
local tail = meta[1]
if mode == 'N' and tail then return {'stale', tail} end
if mode == 'I' and tail ~= expected then return {'stale', tail or ''} end
local count = tonumber(meta[2] or '0')
local ts = now
if meta[3] and tonumber(meta[3]) > ts then ts = tonumber(meta[3]) end
local up = now
if meta[4] and tonumber(meta[4]) > up then up = tonumber(meta[4]) end
local first = count
for _, i in ipairs(fresh) do
  local b = 15 + 4 * i
  add_message(count, ts, ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3])
  count = count + 1
end
local ma = {'n', fmt(count), 'ls', fmt(ts), 'up', fmt(up)}
if #fresh > 0 then
  ma[#ma + 1] = 'tail'; ma[#ma + 1] = ARGV[15 + 4 * fresh[#fresh]]
end
if not have then ma[#ma + 1] = 'cr'; ma[#ma + 1] = fmt(now) end
if status ~= '' then ma[#ma + 1] = 'st'; ma[#ma + 1] = status end
if title ~= '' then ma[#ma + 1] = 'ti'; ma[#ma + 1] = string.sub(title, 2) end
if exp ~= '' then ma[#ma + 1] = 'x'; ma[#ma + 1] = exp end
redis.call('HSET', m, unpack(ma))
local positions = '*'
if #fresh < n then positions = table.concat(fresh, ',') end
local created = '0'
if not have then created = '1' end
local lr = fmt(first) .. '|' .. fmt(ts) .. '|' .. created .. '|' .. fmt(up) .. '|' .. positions
commit(h, hd, p, tn, sd, epoch, nonce, lr)
if exp ~= '' then
  -- expired conversations stay (per the contract) until the sweeper erases them; the
  -- server drops them by itself 'grace' after expires_at if no sweeper did
  local xd = math.max(tonumber(exp), now) + tonumber(grace)
  redis.call('HSET', h, 'x', exp, 'xd', fmt(xd))
  hd.xd = fmt(xd)
  redis.call('PEXPIREAT', h, fmt(math.ceil(xd / 1000) + tonumber(ttl)))
  expire(hd, DATA)
elseif hd.xd then
  expire(hd, {m, ids, msg, t, u, a, cp})
end
return {'ok', lr}
""",
    write=True,
)

CONV_STATUS = _script(
    "conv_status",
    CONV_KEYS
    + r"""
local nonce, p, tn, sd, status, epoch = unpack(ARGV, 1, 6)
local now = now_us()
local hd = head(h)
if exists(hd) and dead(hd, now) then return {'ok', '0'} end
if redis.call('EXISTS', m) == 0 then return {'ok', '0'} end
local err = check(hd, now, p, epoch)
if err then return err end
local up = touch(now)
redis.call('HSET', m, 'st', status, 'up', fmt(up))
commit(h, hd, p, tn, sd, epoch, nonce, fmt(up))
return {'ok', '1', fmt(up)}
""",
    write=True,
)

CONV_TITLE = _script(
    "conv_title",
    CONV_KEYS
    + r"""
local nonce, p, tn, sd, title, epoch = unpack(ARGV, 1, 6)
local now = now_us()
local hd = head(h)
if exists(hd) and dead(hd, now) then return {'erased'} end
if redis.call('EXISTS', m) == 0 then return {'notfound'} end
local err = check(hd, now, p, epoch)
if err then return err end
local up = touch(now)
if title == '' then
  redis.call('HDEL', m, 'ti')
else
  redis.call('HSET', m, 'ti', string.sub(title, 2))
end
redis.call('HSET', m, 'up', fmt(up))
commit(h, hd, p, tn, sd, epoch, nonce, fmt(up))
return {'ok', '1', fmt(up)}
""",
    write=True,
)

CONV_SHARE = _script(
    "conv_share",
    CONV_KEYS
    + r"""
local nonce, p, other, flag = unpack(ARGV, 1, 4)
local now = now_us()
local hd = head(h)
if exists(hd) and dead(hd, now) then return {'erased'} end
if redis.call('EXISTS', m) == 0 then return {'notfound'} end
if hd.o ~= p then return {'notowned'} end
if flag == '1' then
  redis.call('HSET', h, 's:' .. other, '1')
else
  redis.call('HDEL', h, 's:' .. other)
end
redis.call('HSET', h, 'lw', nonce, 'lr', '1')
return {'ok', '1'}
""",
    write=True,
)

CONV_TRUNCATE = _script(
    "conv_truncate",
    CONV_KEYS
    + r"""
local nonce, p, tn, sd, mid, epoch = unpack(ARGV, 1, 6)
local now = now_us()
local hd = head(h)
if exists(hd) and dead(hd, now) then return {'erased'} end
if redis.call('EXISTS', m) == 0 then return {'notfound'} end
local err = check(hd, now, p, epoch)
if err then return err end
local seq = redis.call('HGET', ids, mid)
if not seq then return {'nomessage'} end
seq = tonumber(seq)
local cut = seq
if not redis.call('ZSCORE', u, fmt(seq)) then cut = seq + 1 end
local n = tonumber(redis.call('HGET', m, 'n') or '0')
local removed = 0
for s = cut, n - 1 do
  local raw = redis.call('HGET', msg, fmt(s))
  if raw then
    local _, id = rec_parts(raw)
    redis.call('HDEL', ids, id)
  end
  redis.call('HDEL', msg, fmt(s))
  redis.call('ZREM', t, pad(s))
  removed = removed + 1
end
if removed > 0 then
  for _, z in ipairs({u, a, cp}) do redis.call('ZREMRANGEBYSCORE', z, fmt(cut), '+inf') end
end
local up = touch(now)
local ma = {'n', fmt(cut), 'up', fmt(up)}
if cut == 0 then
  redis.call('HDEL', m, 'tail', 'ls')
else
  local ts, id = rec_parts(redis.call('HGET', msg, fmt(cut - 1)))
  ma[#ma + 1] = 'tail'; ma[#ma + 1] = id; ma[#ma + 1] = 'ls'; ma[#ma + 1] = fmt(ts)
end
redis.call('HSET', m, unpack(ma))
commit(h, hd, p, tn, sd, epoch, nonce, fmt(removed) .. '|' .. fmt(up))
return {'ok', fmt(removed), fmt(up)}
""",
    write=True,
)

CONV_BRANCH = _script(
    "conv_branch",
    CONV_KEYS
    + r"""
local nonce, p, tn, sd, title = unpack(ARGV, 1, 5)
local n = tonumber(ARGV[6])
if redis.call('EXISTS', h) == 1 then return {'conflict'} end
local now = now_us()
for i = 0, n - 1 do
  local b = 7 + 4 * i
  add_message(i, now, ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3])
end
local ma = {'n', fmt(n), 'ls', fmt(now), 'up', fmt(now), 'cr', fmt(now)}
if n > 0 then ma[#ma + 1] = 'tail'; ma[#ma + 1] = ARGV[7 + 4 * (n - 1)] end
if title ~= '' then ma[#ma + 1] = 'ti'; ma[#ma + 1] = string.sub(title, 2) end
redis.call('HSET', m, unpack(ma))
redis.call('HSET', h, 'o', p, 'tn', tn, 'sd', sd, 'lw', nonce, 'lr', fmt(now))
return {'ok', fmt(now)}
""",
    write=True,
)

CONV_ERASE = _script(
    "conv_erase",
    CONV_KEYS
    + r"""
local nonce, mode, p, param, ttl = unpack(ARGV, 1, 5)
local now = now_us()
local hd = head(h)
if not exists(hd) or hd.e then return {'ok', '0'} end
if mode == 'owner' then
  if hd.o ~= p then return {'notowned'} end
elseif mode == 'expired' then
  local x = redis.call('HGET', h, 'x')
  if not (x and tonumber(x) <= now) then return {'ok', '0'} end
else
  if dead(hd, now) then return {'ok', '0'} end
  local up = redis.call('HGET', m, 'up')
  if not up then return {'ok', '0'} end
  if mode == 'idle' then
    if not (tonumber(up) < now - tonumber(param)) then return {'ok', '0'} end
  elseif mode == 'overcap' then
    if up ~= param or hd.o ~= p then return {'ok', '0'} end
  else
    return redis.error_reply('unknown erase mode ' .. mode)
  end
end
local info = redis.call('HMGET', h, 'tn', 'sd', 'o')
redis.call('UNLINK', unpack(DATA))
redis.call('DEL', h)
redis.call('HSET', h, 'e', fmt(now), 'tn', info[1] or '', 'sd', info[2] or '',
  'eo', info[3] or '', 'lw', nonce, 'lr', '1')
redis.call('PEXPIREAT', h, fmt(math.floor(now / 1000) + tonumber(ttl)))
return {'ok', '1', info[3] or ''}
""",
    write=True,
)

# --- conversation reads --------------------------------------------------------------

CONV_INFO = _script(
    "conv_info",
    r"""
local h, m = KEYS[1], KEYS[2]
local p, admin = ARGV[1], ARGV[2]
local now = now_us()
local hd = head(h)
if admin == '1' then
  if not exists(hd) then return {fmt(now), 'absent'} end
  if hd.e then return {fmt(now), 'erased'} end
  if dead(hd, now) then return {fmt(now), 'expired', hd.o} end
elseif not visible(h, hd, now, p) then
  return {fmt(now), 'absent'}
end
local mt = redis.call('HMGET', m, 'cr', 'up', 'ti', 'x', 'st', 'tail', 'n')
if not mt[1] then return {fmt(now), 'absent'} end
local shared = {}
local all = redis.call('HGETALL', h)
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 2) == 's:' then shared[#shared + 1] = string.sub(all[i], 3) end
end
local ids = redis.call('HMGET', h, 'tn', 'sd')
return {fmt(now), 'ok', hd.o, mt[1], mt[2], mt[3], mt[4], mt[5], mt[6], mt[7], shared, ids[1],
  ids[2]}
""",
    write=False,
)

CONV_TRANSCRIPT = _script(
    "conv_transcript",
    r"""
local h, m, msg, t, u, a = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local p, speaker, mode, arg, t0, t1, limit = unpack(ARGV, 1, 7)
limit = tonumber(limit)
local now = now_us()
local hd = head(h)
if not visible(h, hd, now, p) then return {} end
local n = tonumber(redis.call('HGET', m, 'n') or '0')
local z = nil
if speaker == 'user' then z = u elseif speaker == 'assistant' then z = a end
local seqs, idx = {}, {}
if mode == 'index' then
  local i = tonumber(arg)
  if z == nil then
    if i < 0 then i = n + i end
    if i < 0 or i >= n then return {} end
    seqs[1] = i; idx[1] = i
  else
    local r = redis.call('ZRANGE', z, arg, arg)
    if #r == 0 then return {} end
    if i < 0 then i = redis.call('ZCARD', z) + i end
    seqs[1] = tonumber(r[1]); idx[1] = i
  end
elseif mode == 'time' then
  local f = redis.call('ZRANGEBYSCORE', t, t0, t1, 'LIMIT', 0, 1)
  if #f == 0 then return {} end
  local l = redis.call('ZREVRANGEBYSCORE', t, t1, t0, 'LIMIT', 0, 1)
  local fs, ls = tonumber(f[1]), tonumber(l[1])
  if z == nil then
    if limit >= 0 then ls = math.min(ls, fs + limit - 1) end
    for s = fs, ls do seqs[#seqs + 1] = s; idx[#idx + 1] = s end
  else
    local r
    if limit >= 0 then
      r = redis.call('ZRANGEBYSCORE', z, fmt(fs), fmt(ls), 'LIMIT', 0, limit)
    else
      r = redis.call('ZRANGEBYSCORE', z, fmt(fs), fmt(ls))
    end
    local base = redis.call('ZCOUNT', z, '-inf', '(' .. fmt(fs))
    for k, s in ipairs(r) do seqs[k] = tonumber(s); idx[k] = base + k - 1 end
  end
else
  if z == nil then
    local last = n - 1
    if limit >= 0 then last = math.min(last, limit - 1) end
    for s = 0, last do seqs[#seqs + 1] = s; idx[#idx + 1] = s end
  else
    local r = redis.call('ZRANGE', z, 0, limit >= 0 and limit - 1 or -1)
    for k, s in ipairs(r) do seqs[k] = tonumber(s); idx[k] = k - 1 end
  end
end
local recs = hmget_seqs(msg, seqs)
local out = {}
for k = 1, #seqs do
  if recs[k] then out[#out + 1] = fmt(idx[k]); out[#out + 1] = recs[k] end
end
return out
""",
    write=False,
)

CONV_MESSAGES = _script(
    "conv_messages",
    r"""
local h, m, msg, u, a, cp = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local p, mode, x, y = unpack(ARGV, 1, 4)
local now = now_us()
local hd = head(h)
if not visible(h, hd, now, p) then return {} end
local n = tonumber(redis.call('HGET', m, 'n') or '0')
local seqs = {}
if mode == 'range' then
  local first, limit = tonumber(x), tonumber(y)
  local last = n - 1
  if limit >= 0 then last = math.min(last, first + limit - 1) end
  seqs = seq_range(first, last)
elseif mode == 'recent' then
  local k = tonumber(x)
  local both = {}
  for _, z in ipairs({u, a}) do
    for _, s in ipairs(redis.call('ZRANGE', z, -k, -1)) do both[#both + 1] = tonumber(s) end
  end
  table.sort(both)
  for i = math.max(1, #both - k + 1), #both do seqs[#seqs + 1] = both[i] end
else
  local c = redis.call('ZRANGE', cp, -1, -1)
  local first = 0
  if #c > 0 then first = tonumber(c[1]) end
  seqs = seq_range(first, n - 1)
end
local recs = hmget_seqs(msg, seqs)
local out = {}
for k = 1, #seqs do
  if recs[k] then out[#out + 1] = fmt(seqs[k]); out[#out + 1] = recs[k] end
end
return out
""",
    write=False,
)

CONV_PREFIX = _script(
    "conv_prefix",
    r"""
local h, m, ids, msg = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local p, mid = ARGV[1], ARGV[2]
local now = now_us()
local hd = head(h)
if not visible(h, hd, now, p) or redis.call('EXISTS', m) == 0 then return {'notfound'} end
local seq = redis.call('HGET', ids, mid)
if not seq then return {'nomessage'} end
local recs = hmget_seqs(msg, seq_range(0, tonumber(seq)))
return {'ok', redis.call('HGET', m, 'ti'), recs}
""",
    write=False,
)

# --- indexes (slots of their own) ----------------------------------------------------

IX_PAGE = _script(
    "ix_page",
    r"""
local hi, c = '+inf', 0
if ARGV[1] ~= '' then
  hi = ARGV[1]
  c = redis.call('ZCOUNT', KEYS[1], hi, hi)
end
return redis.call('ZREVRANGEBYSCORE', KEYS[1], hi, '-inf', 'WITHSCORES', 'LIMIT', 0,
  tonumber(ARGV[2]) + c)
""",
    write=False,
)

IX_FIX = _script(
    "ix_fix",
    r"""
-- set (or, with an empty new score, remove) a member only if it still has the score seen
local cur = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not cur or tonumber(cur) ~= tonumber(ARGV[2]) then return 0 end
if ARGV[3] == '' then return redis.call('ZREM', KEYS[1], ARGV[1]) end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
return 1
""",
    write=True,
)

# --- OAuth ---------------------------------------------------------------------------

HASH_SWAP = _script(
    "hash_swap",
    r"""
-- set (or delete, with no value) one hash field; return the previous value
local old = redis.call('HGET', KEYS[1], ARGV[1])
if #ARGV >= 2 then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
else redis.call('HDEL', KEYS[1], ARGV[1]) end
return old
""",
    write=True,
)

ALL_SCRIPTS: tuple[Script, ...] = (
    SV_CAS,
    SV_READ,
    SV_DELETE,
    REC_PUT,
    REC_READ,
    REC_DELETE,
    ST_SAVE,
    ST_LOAD,
    ST_DELETE,
    PT_PUT,
    PT_CLAIM,
    PT_ABANDON,
    PT_RECONCILE,
    RECONCILE,
    CONV_APPEND,
    CONV_STATUS,
    CONV_TITLE,
    CONV_SHARE,
    CONV_TRUNCATE,
    CONV_BRANCH,
    CONV_ERASE,
    CONV_INFO,
    CONV_TRANSCRIPT,
    CONV_MESSAGES,
    CONV_PREFIX,
    IX_PAGE,
    IX_FIX,
    HASH_SWAP,
)
