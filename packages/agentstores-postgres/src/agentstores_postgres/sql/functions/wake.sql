-- Tell listeners that key (t, s) changed: a notification on channel 'agentstores' whose
-- payload is a digest of the schema and the key (never the key itself), sent only when
-- the calling session asked for it (the setting agentstores.push = 'on', which the
-- adapter's pool sets when push is on) and a listener follows the key (a live row in
-- watches: one probe of its primary key). A write nobody follows notifies nobody, so it
-- does not queue its commit behind every other notifying commit. NOTIFY is
-- transactional: it is delivered when the caller's transaction commits, and never if it
-- rolls back. Returns true, so a statement can call it in a WHERE clause.
CREATE OR REPLACE FUNCTION __S__.wake(t text, s text) RETURNS boolean LANGUAGE plpgsql AS $fn$
BEGIN
    IF current_setting('agentstores.push', true) = 'on' AND EXISTS (
        SELECT 1 FROM __S__.watches w
         WHERE w.tenant = t AND w.session_id = s AND w.expires_at > now()
    ) THEN
        PERFORM pg_notify('agentstores',
                          left(md5('__S__' || length(t) || ':' || t || s), 16));
    END IF;
    RETURN true;
END
$fn$;
