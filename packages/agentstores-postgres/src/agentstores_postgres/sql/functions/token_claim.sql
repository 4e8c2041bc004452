-- Claim a pending token once: its payload, else ASCLM (DETAIL: its status) or ASEXP
-- past expiry.
CREATE OR REPLACE FUNCTION __S__.token_claim(t text, s text, tok text, p text, n uuid, ttl interval)
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
