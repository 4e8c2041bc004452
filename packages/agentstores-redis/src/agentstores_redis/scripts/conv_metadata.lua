#!lua
--! include header.lua
--! include conversation_keys.lua
-- Merge into the conversation metadata. KEYS: every key of the conversation.
-- ARGV: nonce, principal, tenant, session_id, epoch, limit, pair count, then per pair:
-- name, value ('' remove). Reply: {'ok', '1', updated_us}, {'too_big', size} or a refusal.
local nonce, principal, tenant, session_id, epoch, max = unpack(ARGV, 1, 6)
local n = tonumber(ARGV[7])
local now = now_us()
local hd = read_header(h)
local refusal = judge_existing(hd, now, principal, epoch)
if refusal then return refusal end
local too_big = md_refusal(8, n, max)
if too_big then return too_big end
local updated = touched_at(now)
md_apply(8, n)
redis.call('HSET', meta, 'updated_at', fmt(updated))
commit(h, hd, principal, tenant, session_id, epoch, nonce, fmt(updated))
return {'ok', '1', fmt(updated)}
