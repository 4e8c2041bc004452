-- One supervision compare-and-swap (sv_cas's rule, shared with sv_cas_many): replace the
-- row only if its epoch is the expected one; a swap wakes the key's listeners through
-- wake(w) (w: the index of its wake channel in KEYS, or nil). Returns sv_cas's reply.
local function sv_swap(h, row, w, now, nonce, principal, tenant, session_id, expected, status,
    message_id, epoch)
  local hd = read_header(h)
  if header_exists(hd) then
    if is_dead(hd, now) then return {'ok', '0'} end
    if hd.owner ~= principal then return {'not_owned'} end
    if decimal_lt(epoch, hd.fence) then return {'ok', '0'} end
  end
  local current = redis.call('HGET', row, 'epoch')
  if expected == '' then
    if current then return {'ok', '0'} end
  elseif current ~= expected then
    return {'ok', '0'}
  end
  redis.call('HSET', row, 'status', status, 'message_id', message_id, 'epoch', epoch,
    'heartbeat_at', fmt(now))
  commit(h, hd, principal, tenant, session_id, epoch, nonce, '1')
  expire_with_header(hd, {row})
  if w then wake(w) end
  return {'ok', '1'}
end
