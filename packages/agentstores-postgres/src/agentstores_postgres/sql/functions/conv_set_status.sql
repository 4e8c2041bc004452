-- Set the last turn's status; a no-op on a missing conversation.
CREATE OR REPLACE FUNCTION __S__.conv_set_status(
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
