-- The token for claim/abandon: NOT FOUND for another key, principal or an erased key.
CREATE OR REPLACE FUNCTION __S__.find_token(
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
