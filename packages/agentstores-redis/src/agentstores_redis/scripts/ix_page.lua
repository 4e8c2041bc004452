#!lua flags=no-writes
-- One page of an index, newest first, from a score down (ties at that score included,
-- so the caller can skip what it already saw). KEYS: index. ARGV: highest score ('' for
-- the top), how many. Reply: flat {member, score, ...}.
local hi, ties = '+inf', 0
if ARGV[1] ~= '' then
  hi = ARGV[1]
  ties = redis.call('ZCOUNT', KEYS[1], hi, hi)
end
return redis.call('ZREVRANGEBYSCORE', KEYS[1], hi, '-inf', 'WITHSCORES', 'LIMIT', 0,
  tonumber(ARGV[2]) + ties)
