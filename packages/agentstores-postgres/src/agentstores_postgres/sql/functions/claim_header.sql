-- Claim an absent key for p (creating its header, or resetting a tombstone past its
-- retention). False when another writer created it first: the caller locks again.
CREATE OR REPLACE FUNCTION __S__.claim_header(t text, s text, p text, e bigint, ttl interval)
RETURNS boolean LANGUAGE plpgsql AS $fn$
BEGIN
    UPDATE __S__.keys SET owner = p, fence = coalesce(e, 0), shared_with = '{}',
           erased_at = NULL, nonce = NULL
     WHERE tenant = t AND session_id = s AND erased_at <= clock_timestamp() - ttl;
    IF FOUND THEN
        RETURN true;
    END IF;
    INSERT INTO __S__.keys (tenant, session_id, owner, fence)
    VALUES (t, s, p, coalesce(e, 0)) ON CONFLICT DO NOTHING;
    RETURN FOUND;
END
$fn$;
