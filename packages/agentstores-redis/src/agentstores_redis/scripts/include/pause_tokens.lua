-- Pause token records (pause tokens hash, field = token id):
-- <status P pending | C claimed | A abandoned>|<expires_us>|<claim nonce>|<payload JSON>

-- status, expires_us, claim nonce and payload of a token record
local function token_parts(raw)
  local i = string.find(raw, '|', 3, true)
  local j = string.find(raw, '|', i + 1, true)
  return string.sub(raw, 1, 1), string.sub(raw, 3, i - 1), string.sub(raw, i + 1, j - 1),
    string.sub(raw, j + 1)
end
-- the token's record, or nil: tokens are seen only by the owner of the live conversation
local function owned_token(h, tokens, principal, token_id, now)
  local hd = read_header(h)
  if not hd.owner or is_dead(hd, now) or hd.owner ~= principal then return nil end
  return redis.call('HGET', tokens, token_id) or nil
end
