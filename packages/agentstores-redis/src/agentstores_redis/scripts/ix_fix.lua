#!lua
-- Set (or, with an empty new score, remove) an index member only if it still has the
-- score seen. KEYS: index. ARGV: member, seen score, new score or ''. Reply: 1 or 0.
local current = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not current or tonumber(current) ~= tonumber(ARGV[2]) then return 0 end
if ARGV[3] == '' then return redis.call('ZREM', KEYS[1], ARGV[1]) end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
return 1
