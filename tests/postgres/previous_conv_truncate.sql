-- Truncate at message mid: everything after it goes, and the message itself when cut
-- says so ('before': it goes; 'after': it stays; 'by_role': a user message goes, any
-- other stays). Returns how many messages were removed. cut defaults to 'by_role', what
-- the call without it did, so a caller still passing seven arguments keeps working.
CREATE OR REPLACE FUNCTION __S__.conv_truncate(
    t text, s text, p text, mid text, e bigint, n uuid, ttl interval,
    c text DEFAULT 'by_role'
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
