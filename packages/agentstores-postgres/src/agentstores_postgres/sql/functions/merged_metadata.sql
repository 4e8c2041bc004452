-- md merged with u (name -> text, or JSON null to remove the name); refused with ASBIG
-- when the names' and values' bytes would sum to more than max_bytes.
CREATE OR REPLACE FUNCTION __S__.merged_metadata(md jsonb, u jsonb, max_bytes bigint)
RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $fn$
DECLARE
    merged jsonb; size bigint;
BEGIN
    merged := (md || jsonb_strip_nulls(u))
        - ARRAY(SELECT x.k FROM jsonb_each(u) AS x(k, v) WHERE jsonb_typeof(x.v) = 'null');
    SELECT coalesce(sum(octet_length(x.k) + octet_length(x.v)), 0) INTO size
      FROM jsonb_each_text(merged) AS x(k, v);
    IF size > max_bytes THEN
        RAISE EXCEPTION 'the conversation metadata would be % bytes, over %', size, max_bytes
            USING ERRCODE = 'ASBIG', DETAIL = size::text;
    END IF;
    RETURN merged;
END
$fn$;
