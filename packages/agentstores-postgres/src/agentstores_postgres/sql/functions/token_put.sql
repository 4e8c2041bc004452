-- Store a new pause token (fenced); ASCON when the token id is taken.
CREATE OR REPLACE FUNCTION __S__.token_put(
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
