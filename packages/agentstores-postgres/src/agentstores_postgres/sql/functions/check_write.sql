-- The checks every fenced write makes on a locked header, in the reference order.
CREATE OR REPLACE FUNCTION __S__.check_write(
    h_state text, h_owner text, h_fence bigint, p text, e bigint
) RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    IF h_state = 'erased' THEN
        RAISE EXCEPTION 'the conversation was erased' USING ERRCODE = 'ASERA';
    END IF;
    IF h_state = 'live' THEN
        IF h_owner <> p THEN
            RAISE EXCEPTION 'another principal owns this conversation' USING ERRCODE = 'ASNOW';
        END IF;
        IF e IS NOT NULL AND e < h_fence THEN
            RAISE EXCEPTION 'epoch % is below the fence %', e, h_fence
                USING ERRCODE = 'ASFEN', DETAIL = h_fence::text;
        END IF;
    END IF;
END
$fn$;
