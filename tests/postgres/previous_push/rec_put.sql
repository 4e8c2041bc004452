-- Replace the recording: refused below the key's fence or the stored record's epoch
-- (ASFEN); false (nothing written) for the same message and epoch with a lower index,
-- so a late flush never rolls the snapshot back (agentstores.stores.kit's rule).
CREATE OR REPLACE FUNCTION __S__.rec_put(
    t text, s text, p text, i bigint, msg bytea, mid text, e bigint, n uuid, ttl interval
) RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
    h record; r record;
BEGIN
    LOOP
        SELECT * INTO h FROM __S__.lock_header(t, s, ttl);
        PERFORM __S__.check_write(h.state, h.owner, h.fence, p, e);
        SELECT rc.idx, rc.message_id, rc.epoch INTO r
          FROM __S__.recording rc WHERE rc.tenant = t AND rc.session_id = s;
        IF FOUND THEN
            IF e < r.epoch THEN
                RAISE EXCEPTION 'epoch % is below the recording''s %', e, r.epoch
                    USING ERRCODE = 'ASFEN', DETAIL = r.epoch::text;
            END IF;
            IF r.message_id = mid AND r.epoch = e AND i < r.idx THEN
                RETURN false;
            END IF;
        END IF;
        IF __S__.commit_write(t, s, h.state, h.fence, p, e, ttl) THEN
            EXIT;
        END IF;
    END LOOP;
    INSERT INTO __S__.recording (tenant, session_id, idx, message, message_id, epoch, nonce)
    VALUES (t, s, i, msg, mid, e, n)
    ON CONFLICT (tenant, session_id) DO UPDATE
       SET idx = excluded.idx, message = excluded.message, message_id = excluded.message_id,
           epoch = excluded.epoch, nonce = excluded.nonce;
    RETURN true;
END
$fn$;
