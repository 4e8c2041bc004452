-- Erase (owner's delete when p is set; sweeper's when rule is set, re-checked here):
-- every store's rows of the key go, the header becomes a tombstone, and an owner whose
-- last conversation this was loses their owner_counts row.
CREATE OR REPLACE FUNCTION __S__.conv_erase(
    t text, s text, p text, rule text, idle interval, keep bigint, n uuid, ttl interval
) RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
    h record; c record; now_ timestamptz; above bigint;
BEGIN
    SELECT * INTO h FROM __S__.lock_header(t, s, ttl);
    IF h.state <> 'live' THEN
        RETURN false;
    END IF;
    IF p IS NOT NULL AND h.owner <> p THEN
        RAISE EXCEPTION 'only the owner may delete a conversation' USING ERRCODE = 'ASNOW';
    END IF;
    SELECT cv.owner, cv.updated_at, cv.expires_at INTO c
      FROM __S__.conversations cv WHERE cv.tenant = t AND cv.session_id = s;
    IF rule IS NOT NULL THEN
        IF NOT FOUND THEN
            RETURN false;
        END IF;
        now_ := clock_timestamp();
        IF rule = 'expired' THEN
            IF c.expires_at IS NULL OR c.expires_at > now_ THEN
                RETURN false;
            END IF;
        ELSIF rule = 'idle' THEN
            IF NOT c.updated_at < now_ - idle THEN
                RETURN false;
            END IF;
        ELSIF rule = 'overcap' THEN
            SELECT count(*) INTO above FROM (
                SELECT 1 FROM __S__.conversations cv
                 WHERE cv.tenant = t AND cv.owner = c.owner AND cv.updated_at > '-infinity'
                   AND (cv.updated_at, cv.session_id) > (c.updated_at, s)
                 LIMIT keep) x;
            IF above < keep THEN
                RETURN false;
            END IF;
        ELSE
            RAISE EXCEPTION 'unknown sweep rule %', rule;
        END IF;
    END IF;
    DELETE FROM __S__.supervision WHERE tenant = t AND session_id = s;
    DELETE FROM __S__.recording WHERE tenant = t AND session_id = s;
    DELETE FROM __S__.agent_state WHERE tenant = t AND session_id = s;
    DELETE FROM __S__.pause_tokens WHERE tenant = t AND session_id = s;
    DELETE FROM __S__.messages WHERE tenant = t AND session_id = s AND seq >= 0;
    DELETE FROM __S__.conversations WHERE tenant = t AND session_id = s;
    IF FOUND THEN
        -- the owner's last conversation takes their row with it
        DELETE FROM __S__.owner_counts
         WHERE tenant = t AND owner = h.owner AND conversations <= 1;
        IF NOT FOUND THEN
            UPDATE __S__.owner_counts SET conversations = conversations - 1
             WHERE tenant = t AND owner = h.owner;
        END IF;
    END IF;
    UPDATE __S__.keys SET erased_at = clock_timestamp(), shared_with = '{}', nonce = n
     WHERE tenant = t AND session_id = s;
    RETURN true;
END
$fn$;
