-- Remove the supervision row iff it still holds exactly mid at epoch e.
CREATE OR REPLACE FUNCTION __S__.sup_delete(
    t text, s text, p text, mid text, e bigint, ttl interval
) RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
    h record; gone bigint;
BEGIN
    SELECT * INTO h FROM __S__.lock_header(t, s, ttl);
    IF h.state <> 'live' THEN
        RETURN false;
    END IF;
    IF h.owner <> p THEN
        RAISE EXCEPTION 'another principal owns this conversation' USING ERRCODE = 'ASNOW';
    END IF;
    DELETE FROM __S__.supervision
     WHERE tenant = t AND session_id = s AND message_id = mid AND epoch = e
    RETURNING epoch INTO gone;
    IF gone IS NULL THEN
        RETURN false;
    END IF;
    -- the row's epoch was part of the fence: keep it
    UPDATE __S__.keys SET fence = gone WHERE tenant = t AND session_id = s AND fence < gone;
    RETURN true;
END
$fn$;
