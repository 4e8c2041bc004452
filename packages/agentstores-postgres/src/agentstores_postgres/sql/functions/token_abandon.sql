-- Release a token's row without making it claimable again.
CREATE OR REPLACE FUNCTION __S__.token_abandon(
    t text, s text, tok text, p text, n uuid, ttl interval
) RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM 1 FROM __S__.find_token(t, s, tok, p, ttl);
    UPDATE __S__.pause_tokens SET status = 'abandoned', nonce = n
     WHERE tenant = t AND session_id = s AND token_id = tok;
END
$fn$;
