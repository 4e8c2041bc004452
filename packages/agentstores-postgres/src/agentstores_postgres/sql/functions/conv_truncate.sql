-- Truncate at message mid: everything after it goes, and the message itself when cut
-- says so ('before': it goes; 'after': it stays; 'by_role': a user message goes, any
-- other stays). Returns how many messages were removed. With expected_tail set, only
-- while the tail is that message id: otherwise ASSTA (DETAIL '=' and the tail, empty
-- when there is none) and nothing removed. cut defaults to 'by_role' and expected_tail
-- to NULL (no condition), what the calls without them did, so a caller still passing
-- seven or eight arguments keeps working.
CREATE OR REPLACE FUNCTION __S__.conv_truncate(
    t text, s text, p text, mid text, e bigint, n uuid, ttl interval,
    c text DEFAULT 'by_role', expected_tail text DEFAULT NULL
) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    o record; target record; cut bigint; removed bigint; min_user bigint; min_asst bigint;
    min_turn bigint; tail text;
BEGIN
    SELECT * INTO o FROM __S__.owned_conversation(t, s, p, e, ttl);
    IF expected_tail IS NOT NULL THEN
        SELECT cv.tail_message_id INTO tail FROM __S__.conversations cv
         WHERE cv.tenant = t AND cv.session_id = s;
        IF tail IS DISTINCT FROM expected_tail THEN
            RAISE EXCEPTION 'transcript tail is %, expected %',
                coalesce(tail, '(empty)'), expected_tail
                USING ERRCODE = 'ASSTA', DETAIL = coalesce('=' || tail, '');
        END IF;
    END IF;
    SELECT m.seq, m.role INTO target FROM __S__.messages m
     WHERE m.tenant = t AND m.session_id = s AND m.message_id = mid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no message % in this conversation', mid USING ERRCODE = 'ASNFD';
    END IF;
    cut := CASE
        WHEN c = 'before' OR (c = 'by_role' AND target.role = 'user') THEN target.seq
        WHEN c IN ('after', 'by_role') THEN target.seq + 1
    END;
    IF cut IS NULL THEN
        RAISE EXCEPTION 'unknown cut %', c USING ERRCODE = '22023';
    END IF;
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
