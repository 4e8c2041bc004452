-- Remove the recording iff it belongs to message mid; e is fenced like any write.
CREATE OR REPLACE FUNCTION __S__.rec_delete(
    t text, s text, p text, mid text, e bigint, ttl interval
) RETURNS boolean LANGUAGE plpgsql AS $fn$
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
