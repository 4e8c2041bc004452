"""The schema: tables, indexes, server-side functions, versioned migrations, grants.

``agentstores schema install URL --schema S --runtime-role R`` (or :func:`install`) runs as
an administrator: it creates schema ``S``, applies every migration newer than the version
recorded in ``S.schema_version`` (all in one transaction, under an advisory lock so two
installers never interleave), records the new version, and grants ``R`` exactly what the
adapter uses: ``USAGE`` on the schema, ``SELECT`` on the version marker, ``SELECT, INSERT,
UPDATE, DELETE`` on the data tables and ``EXECUTE`` on the functions. Running it again
migrates forward; it never runs backward. At runtime the adapter runs no DDL:
:func:`check` refuses to start when the marker is missing, older or newer than
:data:`SCHEMA_VERSION`, or when a privilege is missing, naming what is wrong.

Why server-side functions: a write must lock the key's header row and then read other
tables. In one SQL statement every read uses the snapshot taken when the statement
began, so after waiting for the lock it could decide on stale rows. Inside a PL/pgSQL
function (READ COMMITTED, VOLATILE) each statement takes a fresh snapshot, so everything
read after ``SELECT ... FOR UPDATE`` on the header is current. Each store call is still
one statement and one round trip.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from agentstores.errors import BackendUnavailableError, UsageError

from .urls import DEFAULT_SCHEMA, parse_url

SCHEMA_VERSION = 2
"""The version this adapter needs; :func:`install` brings a schema up to it."""

MARKER = "schema_version"
DATA_TABLES = (
    "keys",
    "supervision",
    "recording",
    "agent_state",
    "conversations",
    "owner_counts",
    "messages",
    "pause_tokens",
    "oauth_integrations",
    "oauth_clients",
)
TABLE_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE")

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def check_identifier(name: str, what: str) -> str:
    """Schema and role names are plain identifiers; anything else is refused up front."""
    if not isinstance(name, str) or not _IDENT.match(name):
        raise UsageError(
            f"{what} must be a plain identifier (letters, digits, _; at most 63), got {name!r}"
        )
    return name


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# --- migration 1: storage -------------------------------------------------------------

_V1 = r"""
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
"""

# --- migration 2: server-side functions -----------------------------------------------
#
# Errors leave through SQLSTATEs of class "AS" (agentstores), translated in errors.py:
#   ASNOW not owned, ASERA erased, ASFEN fenced (DETAIL: the fence), ASNFD not found,
#   ASSTA stale tail (DETAIL: the tail), ASCON conflict, ASEXP expired,
#   ASCLM already claimed (DETAIL: the status).
# Raising rolls the whole call back, including a header it had just claimed.

_V2 = r"""
-- Lock the header of (t, s) for a write. state: 'absent' (no row, or a tombstone past
-- its retention: nothing locked), 'erased' (a live tombstone) or 'live'.
CREATE FUNCTION __S__.lock_header(
    t text, s text, ttl interval,
    OUT state text, OUT owner text, OUT fence bigint, OUT shared_with text[]
) LANGUAGE plpgsql AS $fn$
DECLARE
    erased timestamptz;
BEGIN
    SELECT k.owner, k.fence, k.shared_with, k.erased_at INTO owner, fence, shared_with, erased
      FROM __S__.keys k WHERE k.tenant = t AND k.session_id = s FOR UPDATE;
    fence := greatest(fence, (SELECT sv.epoch FROM __S__.supervision sv
                               WHERE sv.tenant = t AND sv.session_id = s));
    IF NOT FOUND OR (erased IS NOT NULL AND erased <= clock_timestamp() - ttl) THEN
        state := 'absent'; owner := NULL; fence := 0; shared_with := '{}';
    ELSIF erased IS NOT NULL THEN
        state := 'erased';
    ELSE
        state := 'live';
    END IF;
END
$fn$;

-- Claim an absent key for p (creating its header, or resetting a tombstone past its
-- retention). False when another writer created it first: the caller locks again.
CREATE FUNCTION __S__.claim_header(t text, s text, p text, e bigint, ttl interval)
RETURNS boolean LANGUAGE plpgsql AS $fn$
BEGIN
    UPDATE __S__.keys SET owner = p, fence = coalesce(e, 0), shared_with = '{}',
           erased_at = NULL, nonce = NULL
     WHERE tenant = t AND session_id = s AND erased_at <= clock_timestamp() - ttl;
    IF FOUND THEN
        RETURN true;
    END IF;
    INSERT INTO __S__.keys (tenant, session_id, owner, fence)
    VALUES (t, s, p, coalesce(e, 0)) ON CONFLICT DO NOTHING;
    RETURN FOUND;
END
$fn$;

-- Supervision CAS: the heartbeat path, so the header logic is inlined.
CREATE FUNCTION __S__.sup_cas(
    t text, s text, p text, expected bigint, st text, mid text, e bigint, n uuid,
    ttl interval
) RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
    h_owner text; k_fence bigint; h_fence bigint; h_erased timestamptz; present boolean;
BEGIN
    LOOP
        SELECT k.owner, k.fence, k.erased_at INTO h_owner, k_fence, h_erased
          FROM __S__.keys k WHERE k.tenant = t AND k.session_id = s FOR UPDATE;
        present := FOUND;
        h_fence := greatest(k_fence, (SELECT sv.epoch FROM __S__.supervision sv
                                       WHERE sv.tenant = t AND sv.session_id = s));
        IF present AND (h_erased IS NULL OR h_erased > clock_timestamp() - ttl) THEN
            EXIT;
        END IF;
        -- absent key: only a create can succeed, and it claims the key
        IF expected IS NOT NULL THEN
            RETURN false;
        END IF;
        IF NOT __S__.claim_header(t, s, p, e, ttl) THEN
            CONTINUE;
        END IF;
        INSERT INTO __S__.supervision
            (tenant, session_id, owner, fence, status, message_id, epoch, heartbeat_at, nonce)
        VALUES (t, s, p, e, st, mid, e, clock_timestamp(), n);
        RETURN true;
    END LOOP;
    IF h_erased IS NOT NULL THEN
        RETURN false;
    END IF;
    IF h_owner <> p THEN
        RAISE EXCEPTION 'another principal owns this conversation' USING ERRCODE = 'ASNOW';
    END IF;
    IF e < h_fence THEN
        RETURN false;
    END IF;
    IF expected IS NULL THEN
        INSERT INTO __S__.supervision
            (tenant, session_id, owner, fence, status, message_id, epoch, heartbeat_at, nonce)
        VALUES (t, s, p, greatest(k_fence, e), st, mid, e, clock_timestamp(), n)
        ON CONFLICT DO NOTHING;
    ELSE
        UPDATE __S__.supervision
           SET status = st, message_id = mid, epoch = e, heartbeat_at = clock_timestamp(),
               nonce = n
         WHERE tenant = t AND session_id = s AND epoch = expected;
    END IF;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF e > h_fence THEN
        UPDATE __S__.keys SET fence = e WHERE tenant = t AND session_id = s;
    END IF;
    RETURN true;
END
$fn$;

CREATE FUNCTION __S__.sup_delete(t text, s text, p text, mid text, e bigint, ttl interval)
RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
    h record; gone bigint;
BEGIN
    SELECT * INTO h FROM __S__.lock_header(t, s, ttl);
    IF h.state <> 'live' THEN
        RETURN false;
    END IF;
    IF h.owner <> p THEN
        RAISE EXCEPTION 'another principal owns this conversation' USING ERRCODE = 'ASNOW';
    END IF;
    DELETE FROM __S__.supervision
     WHERE tenant = t AND session_id = s AND message_id = mid AND epoch = e
    RETURNING epoch INTO gone;
    IF gone IS NULL THEN
        RETURN false;
    END IF;
    -- the row's epoch was part of the fence: keep it
    UPDATE __S__.keys SET fence = gone WHERE tenant = t AND session_id = s AND fence < gone;
    RETURN true;
END
$fn$;

-- The checks every fenced write makes on a locked header, in the reference order.
CREATE FUNCTION __S__.check_write(h_state text, h_owner text, h_fence bigint, p text, e bigint)
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    IF h_state = 'erased' THEN
        RAISE EXCEPTION 'the conversation was erased' USING ERRCODE = 'ASERA';
    END IF;
    IF h_state = 'live' THEN
        IF h_owner <> p THEN
            RAISE EXCEPTION 'another principal owns this conversation' USING ERRCODE = 'ASNOW';
        END IF;
        IF e IS NOT NULL AND e < h_fence THEN
            RAISE EXCEPTION 'epoch % is below the fence %', e, h_fence
                USING ERRCODE = 'ASFEN', DETAIL = h_fence::text;
        END IF;
    END IF;
END
$fn$;

-- After the checks: claim an absent key, or raise a live key's fence to e.
-- False when the claim lost a race (the caller starts over).
CREATE FUNCTION __S__.commit_write(
    t text, s text, h_state text, h_fence bigint, p text, e bigint, ttl interval
) RETURNS boolean LANGUAGE plpgsql AS $fn$
BEGIN
    IF h_state = 'absent' THEN
        RETURN __S__.claim_header(t, s, p, e, ttl);
    END IF;
    IF e IS NOT NULL AND e > h_fence THEN
        UPDATE __S__.keys SET fence = e WHERE tenant = t AND session_id = s;
        -- the CAS path checks the row's copy
        UPDATE __S__.supervision SET fence = e
         WHERE tenant = t AND session_id = s AND fence < e;
    END IF;
    RETURN true;
END
$fn$;

CREATE FUNCTION __S__.rec_put(
    t text, s text, p text, i bigint, msg bytea, mid text, e bigint, n uuid, ttl interval
) RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
    h record; r record;
BEGIN
    LOOP
        SELECT * INTO h FROM __S__.lock_header(t, s, ttl);
        PERFORM __S__.check_write(h.state, h.owner, h.fence, p, e);
        SELECT rc.idx, rc.message_id, rc.epoch INTO r
          FROM __S__.recording rc WHERE rc.tenant = t AND rc.session_id = s;
        IF FOUND THEN
            IF e < r.epoch THEN
                RAISE EXCEPTION 'epoch % is below the recording''s %', e, r.epoch
                    USING ERRCODE = 'ASFEN', DETAIL = r.epoch::text;
            END IF;
            IF r.message_id = mid AND r.epoch = e AND i < r.idx THEN
                RETURN false;
            END IF;
        END IF;
        IF __S__.commit_write(t, s, h.state, h.fence, p, e, ttl) THEN
            EXIT;
        END IF;
    END LOOP;
    INSERT INTO __S__.recording (tenant, session_id, idx, message, message_id, epoch, nonce)
    VALUES (t, s, i, msg, mid, e, n)
    ON CONFLICT (tenant, session_id) DO UPDATE
       SET idx = excluded.idx, message = excluded.message, message_id = excluded.message_id,
           epoch = excluded.epoch, nonce = excluded.nonce;
    RETURN true;
END
$fn$;

CREATE FUNCTION __S__.rec_delete(t text, s text, p text, mid text, e bigint, ttl interval)
RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
    h record;
BEGIN
    SELECT * INTO h FROM __S__.lock_header(t, s, ttl);
    IF h.state = 'absent' THEN
        RETURN false;
    END IF;
    PERFORM __S__.check_write(h.state, h.owner, h.fence, p, e);
    PERFORM __S__.commit_write(t, s, h.state, h.fence, p, e, ttl);
    DELETE FROM __S__.recording WHERE tenant = t AND session_id = s AND message_id = mid;
    RETURN FOUND;
END
$fn$;

CREATE FUNCTION __S__.state_save(
    t text, s text, p text, b bytea, e bigint, n uuid, ttl interval
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    h record;
BEGIN
    LOOP
        SELECT * INTO h FROM __S__.lock_header(t, s, ttl);
        PERFORM __S__.check_write(h.state, h.owner, h.fence, p, e);
        EXIT WHEN __S__.commit_write(t, s, h.state, h.fence, p, e, ttl);
    END LOOP;
    INSERT INTO __S__.agent_state (tenant, session_id, blob, nonce) VALUES (t, s, b, n)
    ON CONFLICT (tenant, session_id) DO UPDATE SET blob = excluded.blob, nonce = excluded.nonce;
END
$fn$;

CREATE FUNCTION __S__.state_delete(t text, s text, p text, e bigint, ttl interval)
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    h record;
BEGIN
    SELECT * INTO h FROM __S__.lock_header(t, s, ttl);
    IF h.state = 'absent' THEN
        RETURN;
    END IF;
    PERFORM __S__.check_write(h.state, h.owner, h.fence, p, e);
    PERFORM __S__.commit_write(t, s, h.state, h.fence, p, e, ttl);
    DELETE FROM __S__.agent_state WHERE tenant = t AND session_id = s;
END
$fn$;

-- Append: returns the seq of the first new message and the stamp every new message got
-- (both NULL when nothing was appended), and which ids were already present.
CREATE FUNCTION __S__.conv_append(
    t text, s text, p text,
    ids text[], roles text[], contents bytea[], metas bytea[], comps boolean[],
    create_if_absent boolean, status text, check_tail boolean, expected_tail text,
    e bigint, new_title text, new_expires timestamptz, n uuid, ttl interval,
    OUT first_seq bigint, OUT stamp timestamptz, OUT present text[]
) LANGUAGE plpgsql AS $fn$
DECLARE
    h record; found_conv boolean; mc bigint; uc bigint; ac bigint; tc bigint; tail text;
    last_at timestamptz; fresh integer; new_users bigint; new_assts bigint; new_tail text;
    now_ timestamptz;
BEGIN
    LOOP
        SELECT * INTO h FROM __S__.lock_header(t, s, ttl);
        IF h.state = 'erased' THEN
            RAISE EXCEPTION 'the conversation was erased' USING ERRCODE = 'ASERA';
        END IF;
        SELECT cv.message_count, cv.user_count, cv.assistant_count, cv.turn_count,
               cv.tail_message_id, cv.last_message_at
          INTO mc, uc, ac, tc, tail, last_at
          FROM __S__.conversations cv WHERE cv.tenant = t AND cv.session_id = s;
        found_conv := FOUND;
        IF NOT found_conv AND NOT create_if_absent THEN
            RAISE EXCEPTION 'no such conversation' USING ERRCODE = 'ASNFD';
        END IF;
        PERFORM __S__.check_write(h.state, h.owner, h.fence, p, e);
        -- One index probe per id (a LATERAL ... LIMIT is never flattened into a join).
        SELECT coalesce(array_agg(u.id), '{}') INTO present
          FROM unnest(ids) AS u(id)
         CROSS JOIN LATERAL (
               SELECT 1 FROM __S__.messages m
                WHERE m.tenant = t AND m.session_id = s AND m.message_id = u.id LIMIT 1) hit;
        fresh := cardinality(ids) - cardinality(present);
        IF cardinality(ids) > 0 AND fresh = 0 THEN
            RETURN;
        END IF;
        IF check_tail AND tail IS DISTINCT FROM expected_tail THEN
            RAISE EXCEPTION 'transcript tail is %, expected %',
                coalesce(tail, '(empty)'), coalesce(expected_tail, '(empty)')
                USING ERRCODE = 'ASSTA', DETAIL = coalesce('=' || tail, '');
        END IF;
        EXIT WHEN __S__.commit_write(t, s, h.state, h.fence, p, e, ttl);
    END LOOP;
    now_ := clock_timestamp();
    IF NOT found_conv THEN
        INSERT INTO __S__.conversations (tenant, session_id, owner, created_at, updated_at)
        VALUES (t, s, p, now_, now_);
        INSERT INTO __S__.owner_counts AS oc (tenant, owner, conversations) VALUES (t, p, 1)
        ON CONFLICT (tenant, owner) DO UPDATE SET conversations = oc.conversations + 1;
        mc := 0; uc := 0; ac := 0; tc := 0;
    END IF;
    IF fresh > 0 THEN
        first_seq := mc;
        stamp := greatest(now_, last_at);
        SELECT count(*) FILTER (WHERE u.role = 'user'),
               count(*) FILTER (WHERE u.role = 'assistant'),
               (array_agg(u.id ORDER BY u.ord DESC))[1]
          INTO new_users, new_assts, new_tail
          FROM unnest(ids, roles) WITH ORDINALITY AS u(id, role, ord)
         WHERE u.id <> ALL (present);
        INSERT INTO __S__.messages (tenant, session_id, seq, message_id, role, content,
                                    metadata, compaction, user_pos, assistant_pos, turn_pos,
                                    created_at, nonce)
        SELECT t, s, mc + x.rn - 1, x.id, x.role, x.content, x.meta, x.comp,
               CASE WHEN x.role = 'user' THEN uc + x.users - 1 END,
               CASE WHEN x.role = 'assistant' THEN ac + x.assistants - 1 END,
               CASE WHEN x.role IN ('user', 'assistant')
                    THEN tc + x.users + x.assistants - 1 END,
               stamp, n
          FROM (SELECT u.id, u.role, u.content, u.meta, u.comp,
                       row_number() OVER w AS rn,
                       count(*) FILTER (WHERE u.role = 'user') OVER w AS users,
                       count(*) FILTER (WHERE u.role = 'assistant') OVER w AS assistants
                  FROM unnest(ids, roles, contents, metas, comps) WITH ORDINALITY
                       AS u(id, role, content, meta, comp, ord)
                 WHERE u.id <> ALL (present)
                WINDOW w AS (ORDER BY u.ord)) x;
    ELSE
        new_users := 0; new_assts := 0; new_tail := NULL;
    END IF;
    UPDATE __S__.conversations cv
       SET message_count = cv.message_count + fresh,
           user_count = cv.user_count + new_users,
           assistant_count = cv.assistant_count + new_assts,
           turn_count = cv.turn_count + new_users + new_assts,
           tail_message_id = coalesce(new_tail, cv.tail_message_id),
           last_message_at = coalesce(stamp, cv.last_message_at),
           updated_at = greatest(cv.updated_at, now_),
           last_turn_status = coalesce(status, cv.last_turn_status),
           title = coalesce(new_title, cv.title),
           expires_at = coalesce(new_expires, cv.expires_at),
           nonce = n
     WHERE cv.tenant = t AND cv.session_id = s;
END
$fn$;

-- Lock the header and return the conversation for a write that needs it to exist.
CREATE FUNCTION __S__.owned_conversation(
    t text, s text, p text, e bigint, ttl interval, OUT h_fence bigint, OUT h_shared text[]
) LANGUAGE plpgsql AS $fn$
DECLARE
    h record;
BEGIN
    SELECT * INTO h FROM __S__.lock_header(t, s, ttl);
    IF h.state = 'erased' THEN
        RAISE EXCEPTION 'the conversation was erased' USING ERRCODE = 'ASERA';
    END IF;
    PERFORM 1 FROM __S__.conversations cv WHERE cv.tenant = t AND cv.session_id = s;
    IF h.state = 'absent' OR NOT FOUND THEN
        RAISE EXCEPTION 'no such conversation' USING ERRCODE = 'ASNFD';
    END IF;
    PERFORM __S__.check_write(h.state, h.owner, h.fence, p, e);
    h_fence := h.fence;
    h_shared := h.shared_with;
END
$fn$;

CREATE FUNCTION __S__.conv_set_status(
    t text, s text, p text, st text, e bigint, n uuid, ttl interval
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    h record;
BEGIN
    SELECT * INTO h FROM __S__.lock_header(t, s, ttl);
    IF h.state <> 'live' THEN
        RETURN;
    END IF;
    PERFORM 1 FROM __S__.conversations cv WHERE cv.tenant = t AND cv.session_id = s;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM __S__.check_write(h.state, h.owner, h.fence, p, e);
    PERFORM __S__.commit_write(t, s, h.state, h.fence, p, e, ttl);
    UPDATE __S__.conversations
       SET last_turn_status = st, updated_at = greatest(updated_at, clock_timestamp()), nonce = n
     WHERE tenant = t AND session_id = s;
END
$fn$;

CREATE FUNCTION __S__.conv_set_title(
    t text, s text, p text, new_title text, e bigint, n uuid, ttl interval
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    o record;
BEGIN
    SELECT * INTO o FROM __S__.owned_conversation(t, s, p, e, ttl);
    PERFORM __S__.commit_write(t, s, 'live', o.h_fence, p, e, ttl);
    UPDATE __S__.conversations
       SET title = new_title, updated_at = greatest(updated_at, clock_timestamp()), nonce = n
     WHERE tenant = t AND session_id = s;
END
$fn$;

CREATE FUNCTION __S__.conv_share(
    t text, s text, p text, other text, share boolean, n uuid, ttl interval
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    o record;
BEGIN
    SELECT * INTO o FROM __S__.owned_conversation(t, s, p, NULL, ttl);
    UPDATE __S__.keys
       SET shared_with = CASE
               WHEN share THEN array_append(array_remove(shared_with, other), other)
               ELSE array_remove(shared_with, other) END,
           nonce = n
     WHERE tenant = t AND session_id = s;
END
$fn$;

CREATE FUNCTION __S__.conv_truncate(
    t text, s text, p text, mid text, e bigint, n uuid, ttl interval
) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    o record; target record; cut bigint; removed bigint; min_user bigint; min_asst bigint;
    min_turn bigint;
BEGIN
    SELECT * INTO o FROM __S__.owned_conversation(t, s, p, e, ttl);
    SELECT m.seq, m.role INTO target FROM __S__.messages m
     WHERE m.tenant = t AND m.session_id = s AND m.message_id = mid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no message % in this conversation', mid USING ERRCODE = 'ASNFD';
    END IF;
    cut := CASE WHEN target.role = 'user' THEN target.seq ELSE target.seq + 1 END;
    WITH gone AS (
        DELETE FROM __S__.messages m
         WHERE m.tenant = t AND m.session_id = s AND m.seq >= cut
     RETURNING m.user_pos, m.assistant_pos, m.turn_pos
    )
    SELECT count(*), min(gone.user_pos), min(gone.assistant_pos), min(gone.turn_pos)
      INTO removed, min_user, min_asst, min_turn FROM gone;
    PERFORM __S__.commit_write(t, s, 'live', o.h_fence, p, e, ttl);
    UPDATE __S__.conversations cv
       SET message_count = cut,
           user_count = coalesce(min_user, cv.user_count),
           assistant_count = coalesce(min_asst, cv.assistant_count),
           turn_count = coalesce(min_turn, cv.turn_count),
           tail_message_id = (SELECT m.message_id FROM __S__.messages m
                               WHERE m.tenant = t AND m.session_id = s AND m.seq = cut - 1),
           updated_at = greatest(cv.updated_at, clock_timestamp()),
           nonce = n
     WHERE cv.tenant = t AND cv.session_id = s;
    RETURN removed;
END
$fn$;

CREATE FUNCTION __S__.conv_branch(
    t text, s text, p text, mid text, new_s text, n uuid, ttl interval
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    src record; target_seq bigint; h record; now_ timestamptz; copied record;
BEGIN
    -- FOR SHARE keeps the source still while it is copied (writers lock FOR UPDATE).
    SELECT k.owner, cv.title INTO src
      FROM __S__.keys k
      JOIN __S__.conversations cv ON cv.tenant = k.tenant AND cv.session_id = k.session_id
     WHERE k.tenant = t AND k.session_id = s AND k.erased_at IS NULL
       AND (k.owner = p OR p = ANY (k.shared_with))
       FOR SHARE OF k;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no such conversation' USING ERRCODE = 'ASNFD';
    END IF;
    SELECT m.seq INTO target_seq FROM __S__.messages m
     WHERE m.tenant = t AND m.session_id = s AND m.message_id = mid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no message % in this conversation', mid USING ERRCODE = 'ASNFD';
    END IF;
    LOOP
        SELECT * INTO h FROM __S__.lock_header(t, new_s, ttl);
        IF h.state <> 'absent' THEN
            RAISE EXCEPTION 'the branch''s key is already in use' USING ERRCODE = 'ASCON';
        END IF;
        EXIT WHEN __S__.claim_header(t, new_s, p, NULL, ttl);
    END LOOP;
    now_ := clock_timestamp();
    WITH ins AS (
        INSERT INTO __S__.messages (tenant, session_id, seq, message_id, role, content,
                                    metadata, compaction, user_pos, assistant_pos, turn_pos,
                                    created_at, nonce)
        SELECT t, new_s, m.seq, replace(gen_random_uuid()::text, '-', ''), m.role, m.content,
               m.metadata, m.compaction, m.user_pos, m.assistant_pos, m.turn_pos, now_, n
          FROM __S__.messages m
         WHERE m.tenant = t AND m.session_id = s AND m.seq >= 0 AND m.seq <= target_seq
        RETURNING seq, message_id, role
    )
    SELECT count(*) AS total,
           count(*) FILTER (WHERE ins.role = 'user') AS users,
           count(*) FILTER (WHERE ins.role = 'assistant') AS assistants,
           (SELECT i.message_id FROM ins i ORDER BY i.seq DESC LIMIT 1) AS tail
      INTO copied FROM ins;
    INSERT INTO __S__.conversations (tenant, session_id, owner, title, created_at, updated_at,
                                     tail_message_id, message_count, user_count,
                                     assistant_count, turn_count, last_message_at, nonce)
    VALUES (t, new_s, p, src.title, now_, now_, copied.tail, copied.total, copied.users,
            copied.assistants, copied.users + copied.assistants, now_, n);
    INSERT INTO __S__.owner_counts AS oc (tenant, owner, conversations) VALUES (t, p, 1)
    ON CONFLICT (tenant, owner) DO UPDATE SET conversations = oc.conversations + 1;
    UPDATE __S__.keys SET nonce = n WHERE tenant = t AND session_id = new_s;
END
$fn$;

-- Erase (owner's delete when p is set; sweeper's when rule is set, re-checked here).
CREATE FUNCTION __S__.conv_erase(
    t text, s text, p text, rule text, idle interval, keep bigint, n uuid, ttl interval
) RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
    h record; c record; now_ timestamptz; above bigint;
BEGIN
    SELECT * INTO h FROM __S__.lock_header(t, s, ttl);
    IF h.state <> 'live' THEN
        RETURN false;
    END IF;
    IF p IS NOT NULL AND h.owner <> p THEN
        RAISE EXCEPTION 'only the owner may delete a conversation' USING ERRCODE = 'ASNOW';
    END IF;
    SELECT cv.owner, cv.updated_at, cv.expires_at INTO c
      FROM __S__.conversations cv WHERE cv.tenant = t AND cv.session_id = s;
    IF rule IS NOT NULL THEN
        IF NOT FOUND THEN
            RETURN false;
        END IF;
        now_ := clock_timestamp();
        IF rule = 'expired' THEN
            IF c.expires_at IS NULL OR c.expires_at > now_ THEN
                RETURN false;
            END IF;
        ELSIF rule = 'idle' THEN
            IF NOT c.updated_at < now_ - idle THEN
                RETURN false;
            END IF;
        ELSIF rule = 'overcap' THEN
            SELECT count(*) INTO above FROM (
                SELECT 1 FROM __S__.conversations cv
                 WHERE cv.tenant = t AND cv.owner = c.owner AND cv.updated_at > '-infinity'
                   AND (cv.updated_at, cv.session_id) > (c.updated_at, s)
                 LIMIT keep) x;
            IF above < keep THEN
                RETURN false;
            END IF;
        ELSE
            RAISE EXCEPTION 'unknown sweep rule %', rule;
        END IF;
    END IF;
    DELETE FROM __S__.supervision WHERE tenant = t AND session_id = s;
    DELETE FROM __S__.recording WHERE tenant = t AND session_id = s;
    DELETE FROM __S__.agent_state WHERE tenant = t AND session_id = s;
    DELETE FROM __S__.pause_tokens WHERE tenant = t AND session_id = s;
    DELETE FROM __S__.messages WHERE tenant = t AND session_id = s AND seq >= 0;
    DELETE FROM __S__.conversations WHERE tenant = t AND session_id = s;
    IF FOUND THEN
        UPDATE __S__.owner_counts SET conversations = conversations - 1
         WHERE tenant = t AND owner = h.owner;
    END IF;
    UPDATE __S__.keys SET erased_at = clock_timestamp(), shared_with = '{}', nonce = n
     WHERE tenant = t AND session_id = s;
    RETURN true;
END
$fn$;

CREATE FUNCTION __S__.token_put(
    t text, s text, tok text, p text, payload bytea, expires timestamptz, e bigint, n uuid,
    ttl interval
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    h record;
BEGIN
    LOOP
        SELECT * INTO h FROM __S__.lock_header(t, s, ttl);
        PERFORM __S__.check_write(h.state, h.owner, h.fence, p, e);
        PERFORM 1 FROM __S__.pause_tokens pt
         WHERE pt.tenant = t AND pt.session_id = s AND pt.token_id = tok;
        IF FOUND THEN
            RAISE EXCEPTION 'pause token % already exists', tok USING ERRCODE = 'ASCON';
        END IF;
        EXIT WHEN __S__.commit_write(t, s, h.state, h.fence, p, e, ttl);
    END LOOP;
    INSERT INTO __S__.pause_tokens
        (tenant, session_id, token_id, owner, payload, expires_at, status, nonce)
    VALUES (t, s, tok, p, payload, expires, 'pending', n);
END
$fn$;

-- The token for claim/abandon: NOT FOUND for another key, principal or an erased key.
CREATE FUNCTION __S__.find_token(
    t text, s text, tok text, p text, ttl interval, OUT status text, OUT expires_at timestamptz
) LANGUAGE plpgsql AS $fn$
DECLARE
    h record;
BEGIN
    SELECT * INTO h FROM __S__.lock_header(t, s, ttl);
    SELECT pt.status, pt.expires_at INTO status, expires_at FROM __S__.pause_tokens pt
     WHERE pt.tenant = t AND pt.session_id = s AND pt.token_id = tok;
    IF h.state <> 'live' OR h.owner <> p OR NOT FOUND THEN
        RAISE EXCEPTION 'no such pause token' USING ERRCODE = 'ASNFD';
    END IF;
END
$fn$;

CREATE FUNCTION __S__.token_claim(t text, s text, tok text, p text, n uuid, ttl interval)
RETURNS bytea LANGUAGE plpgsql AS $fn$
DECLARE
    k record; result bytea;
BEGIN
    SELECT * INTO k FROM __S__.find_token(t, s, tok, p, ttl);
    IF k.status <> 'pending' THEN
        RAISE EXCEPTION 'pause token % is %', tok, k.status
            USING ERRCODE = 'ASCLM', DETAIL = k.status;
    END IF;
    IF k.expires_at <= clock_timestamp() THEN
        RAISE EXCEPTION 'pause token % expired', tok USING ERRCODE = 'ASEXP';
    END IF;
    UPDATE __S__.pause_tokens SET status = 'claimed', nonce = n
     WHERE tenant = t AND session_id = s AND token_id = tok
    RETURNING payload INTO result;
    RETURN result;
END
$fn$;

CREATE FUNCTION __S__.token_abandon(t text, s text, tok text, p text, n uuid, ttl interval)
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM 1 FROM __S__.find_token(t, s, tok, p, ttl);
    UPDATE __S__.pause_tokens SET status = 'abandoned', nonce = n
     WHERE tenant = t AND session_id = s AND token_id = tok;
END
$fn$;
"""


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    description: str
    sql: str


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "tables and indexes", _V1),
    Migration(2, "server-side functions", _V2),
)


FUNCTIONS: tuple[str, ...] = tuple(
    sorted({m for mig in MIGRATIONS for m in re.findall(r"CREATE FUNCTION __S__\.(\w+)", mig.sql)})
)
"""Every function the migrations define; the runtime role needs EXECUTE on each."""


def fingerprint(version: int) -> str:
    """SHA-256 of the migrations up to ``version``: a schema installed from other
    definitions of the same version number is refused rather than half-trusted."""
    digest = hashlib.sha256()
    for migration in MIGRATIONS:
        if migration.version <= version:
            digest.update(f"{migration.version}\n{migration.sql}\n".encode())
    return digest.hexdigest()[:16]


def render(sql: str, schema: str) -> str:
    return sql.replace("__S__", quote_ident(check_identifier(schema, "schema")))


def grant_statements(schema: str, role: str) -> list[str]:
    """Exactly what the runtime role needs, and nothing on the functions for PUBLIC."""
    s, r = quote_ident(schema), quote_ident(role)
    tables = ", ".join(f"{s}.{quote_ident(t)}" for t in DATA_TABLES)
    return [
        f"GRANT USAGE ON SCHEMA {s} TO {r}",
        f"GRANT SELECT ON {s}.{MARKER} TO {r}",
        f"GRANT {', '.join(TABLE_PRIVILEGES)} ON {tables} TO {r}",
        f"REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {s} FROM PUBLIC",
        f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {s} TO {r}",
    ]


async def _current_version(conn: Any, schema: str) -> int:
    exists = await conn.fetchval(
        "SELECT to_regclass(format('%I.%I', $1::text, $2::text)) IS NOT NULL", schema, MARKER
    )
    if not exists:
        return 0
    version = await conn.fetchval(f"SELECT version FROM {quote_ident(schema)}.{MARKER}")
    return int(version or 0)


async def install(
    url: str,
    *,
    schema: str | None = None,
    runtime_role: str | None = None,
    target_version: int | None = None,
) -> str:
    """Create or migrate ``schema`` forward and grant ``runtime_role``; returns a summary.

    ``schema`` defaults to the URL's ``?schema=`` option, else ``agentstores``.
    ``target_version`` (default: the latest) exists to install an older version on
    purpose, e.g. to test a migration.
    """
    import asyncpg

    config = parse_url(url)
    schema = check_identifier(schema or config.schema or DEFAULT_SCHEMA, "schema")
    if runtime_role is not None:
        check_identifier(runtime_role, "runtime role")
    target = SCHEMA_VERSION if target_version is None else target_version
    if not 1 <= target <= SCHEMA_VERSION:
        raise UsageError(f"target_version must be between 1 and {SCHEMA_VERSION}")
    try:
        conn = await asyncpg.connect(config.dsn)
    except Exception as exc:
        raise BackendUnavailableError(f"cannot connect to PostgreSQL to install: {exc}") from exc
    try:
        async with conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext('agentstores.schema:' || $1::text))",
                schema,
            )
            if runtime_role is not None:
                found = await conn.fetchval(
                    "SELECT 1 FROM pg_roles WHERE rolname = $1", runtime_role
                )
                if not found:
                    raise UsageError(
                        f"role {runtime_role!r} does not exist; create it first "
                        f'(CREATE ROLE "{runtime_role}" LOGIN PASSWORD ...)'
                    )
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(schema)}")
            before = await _current_version(conn, schema)
            if before > SCHEMA_VERSION:
                raise UsageError(
                    f"schema {schema!r} is at version {before}, newer than this adapter's "
                    f"{SCHEMA_VERSION}; upgrade agentstores-postgres instead"
                )
            if before:
                recorded = await conn.fetchval(
                    f"SELECT fingerprint FROM {quote_ident(schema)}.{MARKER}"
                )
                if recorded != fingerprint(before):
                    raise UsageError(
                        f"schema {schema!r} records version {before} with fingerprint "
                        f"{recorded}, but this adapter's version {before} is "
                        f"{fingerprint(before)}: it was installed from other definitions; "
                        "install into a fresh schema and move the data"
                    )
            applied: list[str] = []
            for migration in MIGRATIONS:
                if before < migration.version <= target:
                    await conn.execute(render(migration.sql, schema))
                    applied.append(f"{migration.version} ({migration.description})")
            after = max(before, target)
            marker = f"{quote_ident(schema)}.{MARKER}"
            await conn.execute(
                f"INSERT INTO {marker} (id, version, fingerprint) VALUES (true, $1, $2) "
                "ON CONFLICT (id) DO UPDATE SET version = excluded.version, "
                "fingerprint = excluded.fingerprint, migrated_at = now() "
                f"WHERE {marker}.version < excluded.version",
                after,
                fingerprint(after),
            )
            if runtime_role is not None:
                for statement in grant_statements(schema, runtime_role):
                    await conn.execute(statement)
    finally:
        await conn.close()
    lines = [f"schema {schema}: version {before} -> {after}"]
    lines.append("applied " + ", ".join(applied) if applied else "nothing to migrate")
    if runtime_role is not None:
        lines.append(
            f"runtime role {runtime_role}: USAGE on the schema, SELECT on {MARKER}, "
            f"{', '.join(TABLE_PRIVILEGES)} on {len(DATA_TABLES)} tables, "
            "EXECUTE on the functions"
        )
    return "; ".join(lines)


# --- the runtime check (no DDL) ------------------------------------------------------


async def check(conn: Any, schema: str) -> int:
    """Refuse to run unless ``schema`` is installed at :data:`SCHEMA_VERSION` and the
    connected role holds every privilege the adapter uses. Returns the version."""
    hint = (
        f"run `agentstores schema install URL --schema {schema} --runtime-role <this role>` "
        "as an administrator"
    )
    row = await conn.fetchrow(
        "SELECT n.oid IS NOT NULL AS exists, current_user AS who, "
        "CASE WHEN n.oid IS NULL THEN false ELSE has_schema_privilege(n.oid, 'USAGE') END "
        "AS usage FROM (SELECT 1) one LEFT JOIN pg_namespace n ON n.nspname = $1",
        schema,
    )
    who = row["who"]
    if not row["exists"]:
        raise BackendUnavailableError(
            f"PostgreSQL schema {schema!r} does not exist: {hint}", schema=schema
        )
    if not row["usage"]:
        raise BackendUnavailableError(
            f"role {who!r} lacks USAGE on schema {schema!r}: {hint}", schema=schema
        )
    marker = f"{quote_ident(schema)}.{MARKER}"
    present = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", marker)
    if not present:
        raise BackendUnavailableError(
            f"schema {schema!r} has no agentstores version marker ({MARKER}); it is not "
            f"installed: {hint}",
            schema=schema,
        )
    if not await conn.fetchval("SELECT has_table_privilege($1, 'SELECT')", marker):
        raise BackendUnavailableError(
            f"role {who!r} lacks SELECT on {schema}.{MARKER}: {hint}", schema=schema
        )
    row = await conn.fetchrow(f"SELECT version, fingerprint FROM {marker}")
    version = int(row["version"]) if row is not None else 0
    if version < SCHEMA_VERSION:
        raise BackendUnavailableError(
            f"schema {schema!r} is at version {version}; this adapter needs "
            f"{SCHEMA_VERSION}: {hint} to migrate it forward",
            schema=schema,
            version=version,
        )
    if version > SCHEMA_VERSION:
        raise BackendUnavailableError(
            f"schema {schema!r} is at version {version}, newer than this adapter "
            f"({SCHEMA_VERSION}); upgrade agentstores-postgres",
            schema=schema,
            version=version,
        )
    if row["fingerprint"] != fingerprint(version):
        raise BackendUnavailableError(
            f"schema {schema!r} is at version {version} but was installed from other "
            f"definitions of it (fingerprint {row['fingerprint']}, this adapter "
            f"{fingerprint(version)}); reinstall it with this adapter's "
            "`agentstores schema install` into a fresh schema",
            schema=schema,
            version=version,
        )
    missing = await _missing_privileges(conn, schema)
    if missing:
        raise BackendUnavailableError(
            f"role {who!r} lacks {', '.join(missing)}: {hint}", schema=schema, missing=missing
        )
    return version


async def _missing_privileges(conn: Any, schema: str) -> list[str]:
    rows = await conn.fetch(
        "SELECT t.tbl, x.priv, c.oid IS NOT NULL AS exists, "
        "CASE WHEN c.oid IS NULL THEN false ELSE has_table_privilege(c.oid, x.priv) END AS ok "
        "FROM unnest($2::text[]) AS t(tbl) CROSS JOIN unnest($3::text[]) AS x(priv) "
        "LEFT JOIN pg_class c ON c.relname = t.tbl "
        "AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1) "
        "ORDER BY t.tbl, x.priv",
        schema,
        list(DATA_TABLES),
        list(TABLE_PRIVILEGES),
    )
    missing: list[str] = []
    for r in rows:
        if not r["exists"]:
            if f"table {schema}.{r['tbl']} (absent)" not in missing:
                missing.append(f"table {schema}.{r['tbl']} (absent)")
        elif not r["ok"]:
            missing.append(f"{r['priv']} on {schema}.{r['tbl']}")
    funcs = await conn.fetch(
        "SELECT p.proname, bool_and(has_function_privilege(p.oid, 'EXECUTE')) AS ok "
        "FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 "
        "GROUP BY p.proname",
        schema,
    )
    allowed = {f["proname"]: f["ok"] for f in funcs}
    for name in FUNCTIONS:
        if name not in allowed:
            missing.append(f"function {schema}.{name} (absent)")
        elif not allowed[name]:
            missing.append(f"EXECUTE on {schema}.{name}")
    return missing
