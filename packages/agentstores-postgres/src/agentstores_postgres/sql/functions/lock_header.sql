-- Lock the header of (t, s) for a write. state: 'absent' (no row, or a tombstone past
-- its retention: nothing locked), 'erased' (a live tombstone) or 'live'. fence is the
-- key's: the larger of the header's and the supervision row's epoch.
--
-- The supervision row is locked too (FOR SHARE, after the header: the order every
-- function that writes both takes), so a fenced write is ordered against the CAS that
-- takes a lease over, which updates that row alone: a CAS in flight is waited for and
-- its epoch fences the write, and a CAS that comes after waits for the write to commit.
-- The CAS takes the supervision row alone, so no lock cycle is possible.
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
