-- Conversation-level metadata: one jsonb map per conversation from a name to the
-- canonical JSON text of its value (kept as text, so every number and key round-trips
-- exactly), shallow-merged by conv_set_metadata and conv_append, copied by conv_branch.

ALTER TABLE __S__.conversations ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}';

-- md merged with u (name -> text, or JSON null to remove the name); refused with ASBIG
-- when the names' and values' bytes would sum to more than max_bytes.
CREATE FUNCTION __S__.merged_metadata(md jsonb, u jsonb, max_bytes bigint)
RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $fn$
DECLARE
    merged jsonb; size bigint;
BEGIN
    merged := (md || jsonb_strip_nulls(u))
        - ARRAY(SELECT x.k FROM jsonb_each(u) AS x(k, v) WHERE jsonb_typeof(x.v) = 'null');
    SELECT coalesce(sum(octet_length(x.k) + octet_length(x.v)), 0) INTO size
      FROM jsonb_each_text(merged) AS x(k, v);
    IF size > max_bytes THEN
        RAISE EXCEPTION 'the conversation metadata would be % bytes, over %', size, max_bytes
            USING ERRCODE = 'ASBIG', DETAIL = size::text;
    END IF;
    RETURN merged;
END
$fn$;

CREATE FUNCTION __S__.conv_set_metadata(
    t text, s text, p text, u jsonb, md_max bigint, e bigint, n uuid, ttl interval
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    o record; merged jsonb;
BEGIN
    SELECT * INTO o FROM __S__.owned_conversation(t, s, p, e, ttl);
    SELECT __S__.merged_metadata(cv.metadata, u, md_max) INTO merged
      FROM __S__.conversations cv WHERE cv.tenant = t AND cv.session_id = s;
    PERFORM __S__.commit_write(t, s, 'live', o.h_fence, p, e, ttl);
    UPDATE __S__.conversations
       SET metadata = merged, updated_at = greatest(updated_at, clock_timestamp()), nonce = n
     WHERE tenant = t AND session_id = s;
END
$fn$;

-- conv_append gains the metadata to merge (NULL: none) in the same commit.
DROP FUNCTION __S__.conv_append(
    text, text, text, text[], text[], bytea[], bytea[], boolean[], boolean, text, boolean,
    text, bigint, text, timestamptz, uuid, interval
);

CREATE FUNCTION __S__.conv_append(
    t text, s text, p text,
    ids text[], roles text[], contents bytea[], metas bytea[], comps boolean[],
    create_if_absent boolean, status text, check_tail boolean, expected_tail text,
    e bigint, new_title text, new_expires timestamptz, n uuid, ttl interval,
    md jsonb, md_max bigint,
    OUT first_seq bigint, OUT stamp timestamptz, OUT present text[]
) LANGUAGE plpgsql AS $fn$
DECLARE
    h record; found_conv boolean; mc bigint; uc bigint; ac bigint; tc bigint; tail text;
    last_at timestamptz; fresh integer; new_users bigint; new_assts bigint; new_tail text;
    now_ timestamptz; merged jsonb;
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
        IF md IS NOT NULL THEN
            merged := __S__.merged_metadata(
                coalesce((SELECT cv.metadata FROM __S__.conversations cv
                           WHERE cv.tenant = t AND cv.session_id = s), '{}'),
                md, md_max);
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
           metadata = coalesce(merged, cv.metadata),
           nonce = n
     WHERE cv.tenant = t AND cv.session_id = s;
END
$fn$;

-- conv_branch copies the source's metadata.
CREATE OR REPLACE FUNCTION __S__.conv_branch(
    t text, s text, p text, mid text, new_s text, n uuid, ttl interval
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    src record; target_seq bigint; h record; now_ timestamptz; copied record;
BEGIN
    -- FOR SHARE keeps the source still while it is copied (writers lock FOR UPDATE).
    SELECT k.owner, cv.title, cv.metadata INTO src
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
                                     assistant_count, turn_count, last_message_at, nonce,
                                     metadata)
    VALUES (t, new_s, p, src.title, now_, now_, copied.tail, copied.total, copied.users,
            copied.assistants, copied.users + copied.assistants, now_, n, src.metadata);
    INSERT INTO __S__.owner_counts AS oc (tenant, owner, conversations) VALUES (t, p, 1)
    ON CONFLICT (tenant, owner) DO UPDATE SET conversations = oc.conversations + 1;
    UPDATE __S__.keys SET nonce = n WHERE tenant = t AND session_id = new_s;
END
$fn$;
