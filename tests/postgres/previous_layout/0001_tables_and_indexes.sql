
CREATE TABLE __S__.schema_version (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    version integer NOT NULL,
    fingerprint text NOT NULL,
    installed_at timestamptz NOT NULL DEFAULT now(),
    migrated_at timestamptz NOT NULL DEFAULT now()
);

-- The key header shared by every conversation-keyed store (docs/semantics.md).
-- The key's fence is GREATEST(keys.fence, the supervision row's epoch): a supervision
-- CAS moves only its own row (the heartbeat path writes one row), every other write
-- raises keys.fence, and deleting the supervision row folds its epoch into keys.fence.
CREATE TABLE __S__.keys (
    tenant text NOT NULL,
    session_id text NOT NULL,
    owner text NOT NULL,
    fence bigint NOT NULL DEFAULT 0,
    shared_with text[] NOT NULL DEFAULT '{}',
    erased_at timestamptz,
    nonce uuid,
    PRIMARY KEY (tenant, session_id)
);
CREATE INDEX keys_tombstones ON __S__.keys (erased_at) WHERE erased_at IS NOT NULL;

-- owner and fence are copies of the header's, kept on the row so that the CAS path
-- reads and writes this one row only: owner never changes while the row exists, and
-- a write that raises keys.fence above the row's epoch raises fence here too (under
-- the header lock, and through this row's lock, which every CAS takes).
CREATE TABLE __S__.supervision (
    tenant text NOT NULL,
    session_id text NOT NULL,
    owner text NOT NULL,
    fence bigint NOT NULL,
    status text NOT NULL,
    message_id text NOT NULL,
    epoch bigint NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    nonce uuid NOT NULL,
    PRIMARY KEY (tenant, session_id)
);

CREATE TABLE __S__.recording (
    tenant text NOT NULL,
    session_id text NOT NULL,
    idx bigint NOT NULL,
    message bytea NOT NULL,
    message_id text NOT NULL,
    epoch bigint NOT NULL,
    nonce uuid NOT NULL,
    PRIMARY KEY (tenant, session_id)
);

CREATE TABLE __S__.agent_state (
    tenant text NOT NULL,
    session_id text NOT NULL,
    blob bytea NOT NULL,
    nonce uuid NOT NULL,
    PRIMARY KEY (tenant, session_id)
);

-- Conversation metadata; the counts make negative and per-speaker indexes lookups.
CREATE TABLE __S__.conversations (
    tenant text NOT NULL,
    session_id text NOT NULL,
    owner text NOT NULL,
    title text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    expires_at timestamptz,
    last_turn_status text,
    tail_message_id text,
    message_count bigint NOT NULL DEFAULT 0,
    user_count bigint NOT NULL DEFAULT 0,
    assistant_count bigint NOT NULL DEFAULT 0,
    turn_count bigint NOT NULL DEFAULT 0,
    last_message_at timestamptz,
    nonce uuid
);
-- Unique but partial (like the message indexes): the key lookup must not be the index a
-- generic plan picks to list a tenant's conversations.
CREATE UNIQUE INDEX conversations_key
    ON __S__.conversations (tenant, session_id) WHERE session_id IS NOT NULL;
CREATE INDEX conversations_listing
    ON __S__.conversations (tenant, owner, updated_at, session_id) WHERE updated_at IS NOT NULL;
CREATE INDEX conversations_expiry
    ON __S__.conversations (expires_at) WHERE expires_at IS NOT NULL;
-- On an expression the listing never uses, so it can never stand in for the listing index.
CREATE INDEX conversations_idle ON __S__.conversations ((updated_at AT TIME ZONE 'UTC'));

-- Conversations per (tenant, owner): lets the over-cap sweep find owners above a cap
-- without scanning every conversation.
CREATE TABLE __S__.owner_counts (
    tenant text NOT NULL,
    owner text NOT NULL,
    conversations bigint NOT NULL,
    PRIMARY KEY (tenant, owner)
);
CREATE INDEX owner_counts_size ON __S__.owner_counts (conversations);

-- One row per message. seq is the position in the transcript; user_pos, assistant_pos
-- and turn_pos the position among the user's, the assistant's, and both speakers'
-- messages (NULL for other roles).
--
-- Every index is partial on its own column being NOT NULL (always true for seq,
-- message_id and created_at). A partial index serves only queries with a strict
-- condition on that column (=, <, >=, ...; a bare IS NOT NULL on a NOT NULL column is
-- dropped by the planner and proves nothing), so each query can use exactly the index
-- made for it. This keeps plans right whatever the statistics say: a generic plan that
-- believes a conversation holds 7 rows cannot pick "scan the conversation and filter"
-- over the lookup, because no index offers that scan.
CREATE TABLE __S__.messages (
    tenant text NOT NULL,
    session_id text NOT NULL,
    seq bigint NOT NULL,
    message_id text NOT NULL,
    role text NOT NULL,
    content bytea NOT NULL,
    metadata bytea NOT NULL,
    compaction boolean NOT NULL,
    user_pos bigint,
    assistant_pos bigint,
    turn_pos bigint,
    created_at timestamptz NOT NULL,
    nonce uuid NOT NULL
);
CREATE UNIQUE INDEX messages_seq
    ON __S__.messages (tenant, session_id, seq) WHERE seq IS NOT NULL;
CREATE UNIQUE INDEX messages_id
    ON __S__.messages (tenant, session_id, message_id) WHERE message_id IS NOT NULL;
CREATE UNIQUE INDEX messages_user
    ON __S__.messages (tenant, session_id, user_pos) WHERE user_pos IS NOT NULL;
CREATE UNIQUE INDEX messages_assistant
    ON __S__.messages (tenant, session_id, assistant_pos) WHERE assistant_pos IS NOT NULL;
CREATE UNIQUE INDEX messages_turn
    ON __S__.messages (tenant, session_id, turn_pos) WHERE turn_pos IS NOT NULL;
CREATE INDEX messages_time
    ON __S__.messages (tenant, session_id, created_at, seq) WHERE created_at IS NOT NULL;
CREATE INDEX messages_compaction
    ON __S__.messages (tenant, session_id, seq) WHERE compaction;

CREATE TABLE __S__.pause_tokens (
    tenant text NOT NULL,
    session_id text NOT NULL,
    token_id text NOT NULL,
    owner text NOT NULL,
    payload bytea NOT NULL,
    expires_at timestamptz NOT NULL,
    status text NOT NULL,
    nonce uuid NOT NULL,
    PRIMARY KEY (tenant, session_id, token_id)
);

CREATE TABLE __S__.oauth_integrations (
    tenant text NOT NULL,
    user_id text NOT NULL,
    server_name text NOT NULL,
    pending_state text,
    pending bytea,
    tokens bytea,
    PRIMARY KEY (tenant, user_id, server_name)
);
CREATE INDEX oauth_integrations_state
    ON __S__.oauth_integrations (pending_state) WHERE pending_state IS NOT NULL;

CREATE TABLE __S__.oauth_clients (
    tenant text NOT NULL,
    server_name text NOT NULL,
    client_info bytea NOT NULL,
    PRIMARY KEY (tenant, server_name)
);
