-- After the checks: claim an absent key, or raise a live key's fence to e.
-- False when the claim lost a race (the caller starts over).
CREATE OR REPLACE FUNCTION __S__.commit_write(
    t text, s text, h_state text, h_fence bigint, p text, e bigint, ttl interval
) RETURNS boolean LANGUAGE plpgsql AS $fn$
BEGIN
    IF h_state = 'absent' THEN
        RETURN __S__.claim_header(t, s, p, e, ttl);
    END IF;
    IF e IS NOT NULL AND e > h_fence THEN
        UPDATE __S__.keys SET fence = e WHERE tenant = t AND session_id = s;
        -- the CAS path checks the row's copy
        UPDATE __S__.supervision SET fence = e
         WHERE tenant = t AND session_id = s AND fence < e;
    END IF;
    RETURN true;
END
$fn$;
