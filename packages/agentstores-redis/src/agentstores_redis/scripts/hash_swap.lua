#!lua
-- Set (or delete, with no value) one hash field; return the previous value.
-- KEYS: hash. ARGV: field[, value].
local old = redis.call('HGET', KEYS[1], ARGV[1])
if #ARGV >= 2 then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
else
  redis.call('HDEL', KEYS[1], ARGV[1])
end
return old
