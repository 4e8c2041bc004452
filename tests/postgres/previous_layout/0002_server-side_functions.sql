
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
