-- Replace the agent state blob (fenced).
CREATE OR REPLACE FUNCTION __S__.state_save(
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
