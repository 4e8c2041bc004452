-- conv_append, same signature and rules, in fewer statements and with generic plans: the
-- header checks and the fence raise are inlined (no lock_header, check_write,
-- commit_write or merged_metadata calls); one statement after the lock reads the
-- supervision epoch, the conversation's counters, the ids already present and the merged
-- metadata; one statement inserts the messages and updates the conversation from what
-- the insert returns. The lock stays a statement of its own: what is read after it takes
-- a fresh snapshot, so nothing decided on is stale.
CREATE OR REPLACE FUNCTION __S__.conv_append(
    t text, s text, p text,
    ids text[], roles text[], contents bytea[], metas bytea[], comps boolean[],
    create_if_absent boolean, status text, check_tail boolean, expected_tail text,
    e bigint, new_title text, new_expires timestamptz, n uuid, ttl interval,
    md jsonb, md_max bigint,
    OUT first_seq bigint, OUT stamp timestamptz, OUT present text[]
) LANGUAGE plpgsql
-- Generic plans: a custom plan knows the arrays' lengths, so its estimate always beats
-- the generic one and every call would be planned anew (most of the call's cost). Each
-- statement has one plan worth having, lookups on the key and the id index; no seq scan,
-- so a plan made while a table was tiny stays right as it grows.
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $fn$
DECLARE
    h_owner text; h_fence bigint; h_erased timestamptz; h_found boolean; h_live boolean;
    sup_epoch bigint; mc bigint; uc bigint; ac bigint; tc bigint; tail text;
    last_at timestamptz; merged jsonb; md_size bigint; fresh integer; now_ timestamptz;
BEGIN
    LOOP
        SELECT k.owner, k.fence, k.erased_at INTO h_owner, h_fence, h_erased
          FROM __S__.keys k WHERE k.tenant = t AND k.session_id = s FOR UPDATE;
        h_found := FOUND;
        IF h_found AND h_erased IS NOT NULL AND h_erased > clock_timestamp() - ttl THEN
            RAISE EXCEPTION 'the conversation was erased' USING ERRCODE = 'ASERA';
        END IF;
        h_live := h_found AND h_erased IS NULL;
        -- One index probe per id (a LATERAL ... LIMIT is never flattened into a join).
        SELECT sv.epoch, cv.message_count, cv.user_count, cv.assistant_count, cv.turn_count,
               cv.tail_message_id, cv.last_message_at,
               (SELECT coalesce(array_agg(u.id), '{}')
                  FROM unnest(ids) AS u(id)
                 CROSS JOIN LATERAL (
                       SELECT 1 FROM __S__.messages m
                        WHERE m.tenant = t AND m.session_id = s AND m.message_id = u.id
                        LIMIT 1) hit),
               mm.merged,
               (SELECT coalesce(sum(octet_length(x.k) + octet_length(x.v)), 0)
                  FROM jsonb_each_text(mm.merged) AS x(k, v))
          INTO sup_epoch, mc, uc, ac, tc, tail, last_at, present, merged, md_size
          FROM (SELECT 1) one
          LEFT JOIN __S__.conversations cv ON cv.tenant = t AND cv.session_id = s
          LEFT JOIN __S__.supervision sv ON sv.tenant = t AND sv.session_id = s
          -- merged_metadata's merge, inline (its size check is below, in the rules' order)
         CROSS JOIN LATERAL (
               SELECT (coalesce(cv.metadata, '{}') || jsonb_strip_nulls(md))
                      - ARRAY(SELECT x.k FROM jsonb_each(md) AS x(k, v)
                               WHERE jsonb_typeof(x.v) = 'null') AS merged) mm;
        IF mc IS NULL AND NOT create_if_absent THEN
            RAISE EXCEPTION 'no such conversation' USING ERRCODE = 'ASNFD';
        END IF;
        IF h_live THEN
            IF h_owner <> p THEN
                RAISE EXCEPTION 'another principal owns this conversation' USING ERRCODE = 'ASNOW';
            END IF;
            h_fence := greatest(h_fence, sup_epoch);
            IF e < h_fence THEN
                RAISE EXCEPTION 'epoch % is below the fence %', e, h_fence
                    USING ERRCODE = 'ASFEN', DETAIL = h_fence::text;
            END IF;
        END IF;
        fresh := cardinality(ids) - cardinality(present);
        IF cardinality(ids) > 0 AND fresh = 0 THEN
            RETURN;
        END IF;
        IF check_tail AND tail IS DISTINCT FROM expected_tail THEN
            RAISE EXCEPTION 'transcript tail is %, expected %',
                coalesce(tail, '(empty)'), coalesce(expected_tail, '(empty)')
                USING ERRCODE = 'ASSTA', DETAIL = coalesce('=' || tail, '');
        END IF;
        IF md_size > md_max THEN
            RAISE EXCEPTION 'the conversation metadata would be % bytes, over %', md_size, md_max
                USING ERRCODE = 'ASBIG', DETAIL = md_size::text;
        END IF;
        IF NOT h_live THEN
            -- an absent key (or a tombstone past its retention): claim it, or start over
            EXIT WHEN __S__.claim_header(t, s, p, e, ttl);
        ELSE
            IF e > h_fence THEN
                UPDATE __S__.keys SET fence = e WHERE tenant = t AND session_id = s;
                -- the CAS path checks the row's copy
                UPDATE __S__.supervision SET fence = e
                 WHERE tenant = t AND session_id = s AND fence < e;
            END IF;
            EXIT;
        END IF;
    END LOOP;
    now_ := clock_timestamp();
    IF mc IS NULL THEN
        INSERT INTO __S__.conversations (tenant, session_id, owner, created_at, updated_at)
        VALUES (t, s, p, now_, now_);
        INSERT INTO __S__.owner_counts AS oc (tenant, owner, conversations) VALUES (t, p, 1)
        ON CONFLICT (tenant, owner) DO UPDATE SET conversations = oc.conversations + 1;
        mc := 0; uc := 0; ac := 0; tc := 0;
    END IF;
    IF fresh > 0 THEN
        first_seq := mc;
        stamp := greatest(now_, last_at);
    END IF;
    -- The counters and the tail follow from the last row inserted (none: unchanged).
    WITH ins AS (
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
                 WHERE fresh > 0 AND u.id <> ALL (present)
                WINDOW w AS (ORDER BY u.ord)) x
        RETURNING seq, message_id, user_pos, assistant_pos, turn_pos
    ), last AS (
        SELECT max(i.seq) + 1 AS messages, max(i.user_pos) + 1 AS users,
               max(i.assistant_pos) + 1 AS assistants, max(i.turn_pos) + 1 AS turns,
               (SELECT i2.message_id FROM ins i2 ORDER BY i2.seq DESC LIMIT 1) AS tail
          FROM ins i
    )
    UPDATE __S__.conversations cv
       SET message_count = coalesce(last.messages, cv.message_count),
           user_count = coalesce(last.users, cv.user_count),
           assistant_count = coalesce(last.assistants, cv.assistant_count),
           turn_count = coalesce(last.turns, cv.turn_count),
           tail_message_id = coalesce(last.tail, cv.tail_message_id),
           last_message_at = coalesce(stamp, cv.last_message_at),
           updated_at = greatest(cv.updated_at, now_),
           last_turn_status = coalesce(status, cv.last_turn_status),
           title = coalesce(new_title, cv.title),
           expires_at = coalesce(new_expires, cv.expires_at),
           metadata = coalesce(merged, cv.metadata),
           nonce = n
      FROM last
     WHERE cv.tenant = t AND cv.session_id = s;
END
$fn$;
