-- Share (share = true) or unshare the conversation with another principal.
CREATE OR REPLACE FUNCTION __S__.conv_share(
    t text, s text, p text, other text, share boolean, n uuid, ttl interval
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    o record;
BEGIN
    SELECT * INTO o FROM __S__.owned_conversation(t, s, p, NULL, ttl);
    UPDATE __S__.keys
       SET shared_with = CASE
               WHEN share THEN array_append(array_remove(shared_with, other), other)
               ELSE array_remove(shared_with, other) END,
           nonce = n
     WHERE tenant = t AND session_id = s;
END
$fn$;
