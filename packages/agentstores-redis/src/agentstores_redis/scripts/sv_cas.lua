#!lua
--! include header.lua
--! include wake.lua
--! include sv_swap.lua
-- Supervision compare-and-swap: replace the row only if its epoch is the expected one.
-- KEYS: header, supervision row, [wake channel]. ARGV: nonce, principal, tenant, session_id, expected
-- epoch ('' = no row yet), status, message_id, epoch.
-- Reply: {'ok', '1'} swapped, {'ok', '0'} not (dead key, fenced, other row), or a refusal.
return sv_swap(KEYS[1], KEYS[2], 3, now_us(), unpack(ARGV, 1, 8))
