-- Push: a write a follower cares about wakes the listeners of its conversation with an
-- empty message on the conversation's wake channel (keys.ConvKeys.wake: P:{D}:w, in the
-- conversation's slot), published with SPUBLISH from inside the script, so only a write
-- that ran publishes, and never before it. The channel is the script's KEYS[i] (a shard
-- channel is routed as a key), passed only when push is on: without it nothing is sent.
-- The message carries nothing: a listener only learns that the conversation changed.
-- Listeners subscribe on primaries only, so the SPUBLISH is kept out of the replication
-- stream (a standalone server would otherwise send it to every replica with the write).
-- pcall: the write is done by now (scripts do not roll back), so a publish refused (an
-- ACL without the channel) must not turn the reply into an error; opening a bundle with
-- push on checks the permission first.
local function wake(i)
  local channel = KEYS[i]
  if channel then
    redis.set_repl(redis.REPL_NONE)
    redis.pcall('SPUBLISH', channel, '')
    redis.set_repl(redis.REPL_ALL)
  end
end
