-- Supervision CAS: the heartbeat path, so the header logic is inlined.
CREATE OR REPLACE FUNCTION __S__.sup_cas(
    t text, s text, p text, expected bigint, st text, mid text, e bigint, n uuid,
    ttl interval
) RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
    h_owner text; k_fence bigint; h_fence bigint; h_erased timestamptz; present boolean;
BEGIN
    LOOP
        SELECT k.owner, k.fence, k.erased_at INTO h_owner, k_fence, h_erased
          FROM __S__.keys k WHERE k.tenant = t AND k.session_id = s FOR UPDATE;
        present := FOUND;
        h_fence := greatest(k_fence, (SELECT sv.epoch FROM __S__.supervision sv
                                       WHERE sv.tenant = t AND sv.session_id = s));
        IF present AND (h_erased IS NULL OR h_erased > clock_timestamp() - ttl) THEN
            EXIT;
        END IF;
        -- absent key: only a create can succeed, and it claims the key
        IF expected IS NOT NULL THEN
            RETURN false;
        END IF;
        IF NOT __S__.claim_header(t, s, p, e, ttl) THEN
            CONTINUE;
        END IF;
        INSERT INTO __S__.supervision
            (tenant, session_id, owner, fence, status, message_id, epoch, heartbeat_at, nonce)
        VALUES (t, s, p, e, st, mid, e, clock_timestamp(), n);
        RETURN true;
    END LOOP;
    IF h_erased IS NOT NULL THEN
        RETURN false;
    END IF;
    IF h_owner <> p THEN
        RAISE EXCEPTION 'another principal owns this conversation' USING ERRCODE = 'ASNOW';
    END IF;
    IF e < h_fence THEN
        RETURN false;
    END IF;
    IF expected IS NULL THEN
        INSERT INTO __S__.supervision
            (tenant, session_id, owner, fence, status, message_id, epoch, heartbeat_at, nonce)
        VALUES (t, s, p, greatest(k_fence, e), st, mid, e, clock_timestamp(), n)
        ON CONFLICT DO NOTHING;
    ELSE
        UPDATE __S__.supervision
           SET status = st, message_id = mid, epoch = e, heartbeat_at = clock_timestamp(),
               nonce = n
         WHERE tenant = t AND session_id = s AND epoch = expected;
    END IF;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF e > h_fence THEN
        UPDATE __S__.keys SET fence = e WHERE tenant = t AND session_id = s;
    END IF;
    RETURN true;
END
$fn$;
