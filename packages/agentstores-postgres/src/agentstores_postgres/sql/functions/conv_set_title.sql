-- Set the title of an existing conversation (fenced).
CREATE OR REPLACE FUNCTION __S__.conv_set_title(
    t text, s text, p text, new_title text, e bigint, n uuid, ttl interval
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    o record;
BEGIN
    SELECT * INTO o FROM __S__.owned_conversation(t, s, p, e, ttl);
    PERFORM __S__.commit_write(t, s, 'live', o.h_fence, p, e, ttl);
    UPDATE __S__.conversations
       SET title = new_title, updated_at = greatest(updated_at, clock_timestamp()), nonce = n
     WHERE tenant = t AND session_id = s;
END
$fn$;
