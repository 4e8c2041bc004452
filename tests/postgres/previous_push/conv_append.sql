-- Append messages in order, atomically: returns the seq of the first new message and
-- the stamp every new message got (both NULL when nothing was appended), and which ids
-- were already present (re-appending an id is a no-op). Refuses, in this order: erased
-- (ASERA), absent when it may not create (ASNFD), another owner (ASNOW), an epoch below
-- the fence (ASFEN, DETAIL the fence), a tail other than the expected one (ASSTA, DETAIL
-- '=' and the tail, empty for an empty transcript), metadata over its limit (ASBIG).
--
-- Two paths. One message that is neither a user's nor an assistant's, appended on an
-- expected tail (a checkpointer's row, a tool's output), is one statement: the header
-- locked, the conversation's row updated only if every rule lets the append through
-- unchanged (the header live and owned, the epoch at the fence, the tail the expected
-- one, the id not present, metadata that only adds names and stays under the limit),
-- then the message inserted after it (a small plan: preparing a plan's nodes is most of
-- a short call). The row is updated on its latest version (an UPDATE waits for a
-- concurrent one and judges its conditions again), and every writer of the conversation
-- holds the header lock, so a tail, count or header read there is current; the id is
-- probed in the statement's snapshot, which a concurrent append of the same id would
-- have moved the tail past. When the row is not updated nothing was written, and the
-- call goes on as below, which tells which rule applies.
--
-- Otherwise: the header lock; one read that also judges the call (the first rule that
-- applies, or none); one statement that inserts the messages and updates the
-- conversation. The lock is a statement of its own: what is read after it takes a
-- fresh snapshot, so nothing decided on is stale. PL/pgSQL prepares each of its
-- expressions again in every transaction, and each call is a transaction, so the rules
-- are judged in that one read rather than by a test each; what is costly is computed
-- only when needed: positions when the batch holds a user or assistant message or an
-- id already present, the null-removing merge when the update removes a name, the
-- exact size when the merged metadata's text (never smaller) is over the limit.
--
-- A fenced append is ordered against the supervision CAS that takes its worker's lease
-- over: that CAS updates the supervision row alone (no header lock), so an append judged
-- against an epoch locks that row too (FOR SHARE, after the header, on both paths). A
-- CAS in flight is waited for and its epoch read (a locked row is read at its latest
-- version, whatever the statement's snapshot), and a CAS after the check waits for the
-- append to commit. Appends without an epoch lock nothing more.
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
    h_owner text; h_fence bigint; h_erased timestamptz;
    verdict text; live boolean; mc bigint; uc bigint; ac bigint;
    tc bigint; tail text; old_md jsonb; merged jsonb; md_size bigint; fresh integer;
    now_ timestamptz; plain boolean;
    -- per message of the batch: its seq (-1: already present) and positions; NULL when
    -- the batch is plain (every message new, none a speaker's: seq = mc + ordinal - 1)
    seqs bigint[]; upos bigint[]; apos bigint[]; tpos bigint[];
    users bigint := 0; assts bigint := 0; kept bigint := 0; new_tail text; i integer;
BEGIN
    IF check_tail AND cardinality(ids) = 1 AND roles[1] <> 'user' AND roles[1] <> 'assistant'
    THEN
        WITH h AS (
            SELECT k.owner, k.fence, k.erased_at, clock_timestamp() AS now_
              FROM __S__.keys k WHERE k.tenant = t AND k.session_id = s FOR UPDATE
        ), cv AS (
            UPDATE __S__.conversations cv
               SET message_count = cv.message_count + 1,
                   tail_message_id = ids[1],
                   last_message_at = greatest(h.now_, cv.last_message_at),
                   updated_at = greatest(cv.updated_at, h.now_),
                   last_turn_status = coalesce(status, cv.last_turn_status),
                   title = coalesce(new_title, cv.title),
                   expires_at = coalesce(new_expires, cv.expires_at),
                   metadata = coalesce(cv.metadata || md, cv.metadata),
                   nonce = n
              FROM h
             WHERE cv.tenant = t AND cv.session_id = s
               AND cv.tail_message_id IS NOT DISTINCT FROM expected_tail
               AND h.erased_at IS NULL AND h.owner = p
               AND (e IS NULL OR e = greatest(h.fence, (
                       SELECT sv.epoch FROM __S__.supervision sv
                        WHERE sv.tenant = t AND sv.session_id = s AND h.owner IS NOT NULL
                          FOR SHARE)))
               AND (md IS NULL OR (jsonb_strip_nulls(md) = md
                                   AND octet_length((cv.metadata || md)::text) <= md_max))
               AND NOT EXISTS (
                       SELECT FROM __S__.messages m
                        WHERE m.tenant = t AND m.session_id = s AND m.message_id = ids[1])
            RETURNING cv.message_count - 1 AS first, cv.last_message_at AS at
        ), ins AS (
            INSERT INTO __S__.messages (tenant, session_id, seq, message_id, role, content,
                                        metadata, compaction, created_at, nonce)
            SELECT t, s, cv.first, ids[1], roles[1], contents[1], metas[1], comps[1], cv.at, n
              FROM cv
        )
        SELECT cv.first, cv.at INTO first_seq, stamp FROM cv;
        IF FOUND THEN
            present := '{}';
            RETURN;
        END IF;
    END IF;
    LOOP
        SELECT k.owner, k.fence, k.erased_at INTO h_owner, h_fence, h_erased
          FROM __S__.keys k WHERE k.tenant = t AND k.session_id = s FOR UPDATE;
        IF e IS NOT NULL THEN
            -- the epoch's row, locked after the header (the order every writer takes)
            PERFORM FROM __S__.supervision sv
              WHERE sv.tenant = t AND sv.session_id = s FOR SHARE;
        END IF;
        -- After the lock: a fresh snapshot, so everything read here is current. The
        -- header is the one locked (none locked: absent, whatever a later snapshot shows).
        SELECT CASE
                 WHEN h_erased > clock_timestamp() - ttl THEN 'erased'
                 WHEN cv.message_count IS NULL AND NOT create_if_absent THEN 'absent'
                 WHEN h_erased IS NULL AND h_owner <> p THEN 'not owned'
                 WHEN h_erased IS NULL AND h_owner IS NOT NULL
                      AND e < greatest(h_fence, sv.epoch) THEN 'fenced'
                 WHEN cardinality(ids) > 0 AND cardinality(ids) = cardinality(x.present)
                   THEN 'present'
                 WHEN check_tail AND cv.tail_message_id IS DISTINCT FROM expected_tail
                   THEN 'stale'
                 -- the rest of the rules, when any has something to do
                 WHEN h_owner IS NULL OR h_erased IS NOT NULL OR cv.message_count IS NULL
                   OR e > greatest(h_fence, sv.epoch) OR jsonb_strip_nulls(md) <> md
                   OR octet_length((coalesce(cv.metadata, '{}') || md)::text) > md_max
                   THEN 'more'
               END,
               h_owner IS NOT NULL AND h_erased IS NULL, greatest(h_fence, sv.epoch),
               cv.message_count, cv.user_count, cv.assistant_count, cv.turn_count,
               cv.tail_message_id, cv.metadata, coalesce(cv.metadata, '{}') || md,
               x.present, cardinality(ids) - cardinality(x.present),
               cv.message_count, greatest(clock_timestamp(), cv.last_message_at),
               clock_timestamp(),
               cardinality(x.present) = 0 AND NOT ('user' = ANY (roles) OR 'assistant' = ANY (roles))
          INTO verdict, live, h_fence, mc, uc, ac, tc, tail, old_md, merged, present, fresh,
               first_seq, stamp, now_, plain
          FROM (SELECT 1) one
          LEFT JOIN __S__.conversations cv ON cv.tenant = t AND cv.session_id = s
          LEFT JOIN __S__.supervision sv ON sv.tenant = t AND sv.session_id = s
          -- one index probe per id (a LATERAL ... LIMIT is never flattened into a join,
          -- and a scan for an id = ANY (array) is not planned as probes)
         CROSS JOIN LATERAL (
               SELECT coalesce(array_agg(u.id), '{}') AS present
                 FROM unnest(ids) AS u(id)
                CROSS JOIN LATERAL (
                      SELECT 1 FROM __S__.messages m
                       WHERE m.tenant = t AND m.session_id = s AND m.message_id = u.id
                       LIMIT 1) hit) x;
        EXIT WHEN verdict IS NULL;
        -- the rules, in order
        IF verdict = 'erased' THEN
            RAISE EXCEPTION 'the conversation was erased' USING ERRCODE = 'ASERA';
        ELSIF verdict = 'absent' THEN
            RAISE EXCEPTION 'no such conversation' USING ERRCODE = 'ASNFD';
        ELSIF verdict = 'not owned' THEN
            RAISE EXCEPTION 'another principal owns this conversation' USING ERRCODE = 'ASNOW';
        ELSIF verdict = 'fenced' THEN
            RAISE EXCEPTION 'epoch % is below the fence %', e, h_fence
                USING ERRCODE = 'ASFEN', DETAIL = h_fence::text;
        ELSIF verdict = 'present' THEN
            first_seq := NULL; stamp := NULL;
            RETURN;
        ELSIF verdict = 'stale' THEN
            RAISE EXCEPTION 'transcript tail is %, expected %',
                coalesce(tail, '(empty)'), coalesce(expected_tail, '(empty)')
                USING ERRCODE = 'ASSTA', DETAIL = coalesce('=' || tail, '');
        END IF;
        -- merged_metadata's merge: a name set to null is removed
        IF jsonb_strip_nulls(md) <> md THEN
            merged := (coalesce(old_md, '{}') || jsonb_strip_nulls(md))
                      - ARRAY(SELECT x.k FROM jsonb_each(md) AS x(k, v)
                               WHERE jsonb_typeof(x.v) = 'null');
        END IF;
        -- its size (names plus values' text) is at most the length of its text
        IF octet_length(merged::text) > md_max THEN
            SELECT coalesce(sum(octet_length(x.k) + octet_length(x.v)), 0) INTO md_size
              FROM jsonb_each_text(merged) AS x(k, v);
            IF md_size > md_max THEN
                RAISE EXCEPTION 'the conversation metadata would be % bytes, over %',
                    md_size, md_max USING ERRCODE = 'ASBIG', DETAIL = md_size::text;
            END IF;
        END IF;
        IF NOT live THEN
            -- an absent key (or a tombstone past its retention): claim it, or start over
            CONTINUE WHEN NOT __S__.claim_header(t, s, p, e, ttl);
        ELSIF e > h_fence THEN
            UPDATE __S__.keys SET fence = e WHERE tenant = t AND session_id = s;
            -- the CAS path checks the row's copy
            UPDATE __S__.supervision SET fence = e
             WHERE tenant = t AND session_id = s AND fence < e;
        END IF;
        IF mc IS NULL THEN
            INSERT INTO __S__.conversations (tenant, session_id, owner, created_at, updated_at)
            VALUES (t, s, p, now_, now_);
            INSERT INTO __S__.owner_counts AS oc (tenant, owner, conversations)
            VALUES (t, p, 1)
            ON CONFLICT (tenant, owner) DO UPDATE SET conversations = oc.conversations + 1;
            mc := 0; uc := 0; ac := 0; tc := 0; first_seq := 0;
        END IF;
        EXIT;
    END LOOP;
    IF fresh = 0 THEN
        first_seq := NULL; stamp := NULL;
    ELSIF NOT plain THEN
        seqs := array_fill(NULL::bigint, ARRAY[cardinality(ids)]);
        upos := seqs; apos := seqs; tpos := seqs;
        FOR i IN 1 .. cardinality(ids) LOOP
            IF ids[i] = ANY (present) THEN
                seqs[i] := -1;
                CONTINUE;
            END IF;
            seqs[i] := mc + kept;
            kept := kept + 1;
            new_tail := ids[i];
            IF roles[i] = 'user' THEN
                upos[i] := uc + users;
                tpos[i] := tc + users + assts;
                users := users + 1;
            ELSIF roles[i] = 'assistant' THEN
                apos[i] := ac + assts;
                tpos[i] := tc + users + assts;
                assts := assts + 1;
            END IF;
        END LOOP;
    END IF;
    WITH ins AS (
        INSERT INTO __S__.messages (tenant, session_id, seq, message_id, role, content,
                                    metadata, compaction, user_pos, assistant_pos, turn_pos,
                                    created_at, nonce)
        SELECT t, s, coalesce(u.sq, mc + u.ord - 1), u.id, u.role, u.content, u.meta, u.comp,
               u.up, u.ap, u.tp, stamp, n
          FROM unnest(ids, roles, contents, metas, comps, seqs, upos, apos, tpos)
               WITH ORDINALITY AS u(id, role, content, meta, comp, sq, up, ap, tp, ord)
         WHERE fresh > 0 AND (u.sq IS NULL OR u.sq >= 0)
    )
    UPDATE __S__.conversations cv
       SET message_count = mc + fresh,
           user_count = uc + users,
           assistant_count = ac + assts,
           turn_count = tc + users + assts,
           tail_message_id = CASE WHEN fresh = 0 THEN cv.tail_message_id
                                  WHEN plain THEN ids[cardinality(ids)] ELSE new_tail END,
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
