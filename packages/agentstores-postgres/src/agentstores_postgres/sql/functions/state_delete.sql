-- Remove the agent state blob (fenced); a no-op on an absent key.
CREATE OR REPLACE FUNCTION __S__.state_delete(t text, s text, p text, e bigint, ttl interval)
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
