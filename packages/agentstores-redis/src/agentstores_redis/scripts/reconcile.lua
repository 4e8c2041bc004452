#!lua flags=no-writes
-- Whether a write whose reply was lost landed: its nonce is still the header's last.
-- KEYS: header. ARGV: the write's nonce. Reply: {'ok', stored result} or {'unknown'}.
local v = redis.call('HMGET', KEYS[1], 'last_write', 'last_result')
if v[1] == ARGV[1] then return {'ok', v[2]} end
return {'unknown'}
