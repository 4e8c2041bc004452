-- Every write that locks a key's header also locks its supervision row (FOR SHARE), so
-- a fenced write is ordered against the supervision CAS that takes a lease over.
--
-- The CAS that takes a lease over (and every heartbeat) updates the supervision row
-- alone, without the header lock. lock_header read that row's epoch unlocked, so a
-- fenced write (a state save, a recording, a pause token, a title...) whose check read
-- the old epoch could commit after the takeover had returned. Locking the row after the
-- header reads it at its latest version (a CAS in flight is waited for, and its epoch
-- fences the write), and a CAS that comes after waits for the write to commit. The
-- order is header, then supervision row, as in every function that writes both; the
-- CAS takes the supervision row alone, so no lock cycle is possible. 0006 did the same
-- for conv_append, which locks its header inline.
CREATE OR REPLACE FUNCTION __S__.lock_header(
    t text, s text, ttl interval,
    OUT state text, OUT owner text, OUT fence bigint, OUT shared_with text[]
) LANGUAGE plpgsql AS $fn$
DECLARE
    erased timestamptz;
BEGIN
    SELECT k.owner, k.fence, k.shared_with, k.erased_at INTO owner, fence, shared_with, erased
      FROM __S__.keys k WHERE k.tenant = t AND k.session_id = s FOR UPDATE;
    IF NOT FOUND OR (erased IS NOT NULL AND erased <= clock_timestamp() - ttl) THEN
        state := 'absent'; owner := NULL; fence := 0; shared_with := '{}';
        RETURN;
    END IF;
    fence := greatest(fence, (SELECT sv.epoch FROM __S__.supervision sv
                               WHERE sv.tenant = t AND sv.session_id = s FOR SHARE));
    IF erased IS NOT NULL THEN
        state := 'erased';
    ELSE
        state := 'live';
    END IF;
END
$fn$;
