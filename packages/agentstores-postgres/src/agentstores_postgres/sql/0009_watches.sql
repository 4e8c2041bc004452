-- Push subscriptions: one row per key a listening connection (a bundle with push on)
-- follows. wake(t, s) probes the primary key and notifies only while a live row names
-- the key, so a write nobody follows sends no NOTIFY (which would serialise its commit
-- with every other notifying commit). The listener inserts a key's row before it counts
-- the key as pushed, deletes it when nobody follows the key any more, pushes expires_at
-- forward on its health-check beat, and now and then deletes every expired row (those
-- of listeners that died without deleting theirs). UNLOGGED: the rows only mirror live
-- connections, which subscribe again after a crash or a failover.
CREATE UNLOGGED TABLE __S__.watches (
    tenant text NOT NULL,
    session_id text NOT NULL,
    listener uuid NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, session_id, listener)
);
CREATE INDEX watches_listener ON __S__.watches (listener);

-- The runtime roles an earlier install granted the data tables get this one too.
DO $grant$
DECLARE
    grantee regrole;
BEGIN
    FOR grantee IN
        SELECT DISTINCT a.grantee::regrole
          FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
         WHERE c.oid = '__S__.keys'::regclass AND a.grantee <> 0 AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON __S__.watches TO %s', grantee);
    END LOOP;
END
$grant$;
