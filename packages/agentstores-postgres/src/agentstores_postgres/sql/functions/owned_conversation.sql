-- Lock the header and return the conversation for a write that needs it to exist.
CREATE OR REPLACE FUNCTION __S__.owned_conversation(
    t text, s text, p text, e bigint, ttl interval, OUT h_fence bigint, OUT h_shared text[]
) LANGUAGE plpgsql AS $fn$
DECLARE
    h record;
BEGIN
    SELECT * INTO h FROM __S__.lock_header(t, s, ttl);
    IF h.state = 'erased' THEN
        RAISE EXCEPTION 'the conversation was erased' USING ERRCODE = 'ASERA';
    END IF;
    PERFORM 1 FROM __S__.conversations cv WHERE cv.tenant = t AND cv.session_id = s;
    IF h.state = 'absent' OR NOT FOUND THEN
        RAISE EXCEPTION 'no such conversation' USING ERRCODE = 'ASNFD';
    END IF;
    PERFORM __S__.check_write(h.state, h.owner, h.fence, p, e);
    h_fence := h.fence;
    h_shared := h.shared_with;
END
$fn$;
