-- Shallow-merge u into the conversation's metadata (see merged_metadata; fenced).
CREATE OR REPLACE FUNCTION __S__.conv_set_metadata(
    t text, s text, p text, u jsonb, md_max bigint, e bigint, n uuid, ttl interval
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    o record; merged jsonb;
BEGIN
    SELECT * INTO o FROM __S__.owned_conversation(t, s, p, e, ttl);
    SELECT __S__.merged_metadata(cv.metadata, u, md_max) INTO merged
      FROM __S__.conversations cv WHERE cv.tenant = t AND cv.session_id = s;
    PERFORM __S__.commit_write(t, s, 'live', o.h_fence, p, e, ttl);
    UPDATE __S__.conversations
       SET metadata = merged, updated_at = greatest(updated_at, clock_timestamp()), nonce = n
     WHERE tenant = t AND session_id = s;
END
$fn$;
