#!lua
--! include header.lua
--! include wake.lua
--! include sv_swap.lua
-- Many supervision compare-and-swaps in one call (a heartbeat batch, on a server that is
-- not a cluster: the rows' keys lie in many slots). Each row is sv_cas on its own, judged
-- and written apart from the others, with its own reply; all share one TIME.
-- KEYS: header and supervision row of each swap in turn. ARGV: sv_cas's eight ARGV for
-- each swap in turn. Reply: one sv_cas reply per swap, in order. Heartbeats wake nobody
-- (a row's heartbeat changes nothing a follower shows), so no swap here publishes.
local now = now_us()
local out = {}
for i = 1, #KEYS / 2 do
  out[i] = sv_swap(KEYS[2 * i - 1], KEYS[2 * i], nil, now, unpack(ARGV, 8 * i - 7, 8 * i))
end
return out
