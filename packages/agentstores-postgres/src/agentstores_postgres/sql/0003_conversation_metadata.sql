-- Conversation-level metadata: one jsonb map per conversation from a name to the
-- canonical JSON text of its value (kept as text, so every number and key round-trips
-- exactly), shallow-merged by conv_set_metadata and conv_append, copied by conv_branch.

ALTER TABLE __S__.conversations ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}';
