-- Branch: a new conversation new_s owned by p holding the prefix of s up to message mid
-- (title and metadata copied, every message given a fresh id). ASNFD when s is not
-- visible to p or has no message mid; ASCON when new_s is in use.
CREATE OR REPLACE FUNCTION __S__.conv_branch(
    t text, s text, p text, mid text, new_s text, n uuid, ttl interval
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    src record; target_seq bigint; h record; now_ timestamptz; copied record;
BEGIN
    -- FOR SHARE keeps the source still while it is copied (writers lock FOR UPDATE).
    SELECT k.owner, cv.title, cv.metadata INTO src
      FROM __S__.keys k
      JOIN __S__.conversations cv ON cv.tenant = k.tenant AND cv.session_id = k.session_id
     WHERE k.tenant = t AND k.session_id = s AND k.erased_at IS NULL
       AND (k.owner = p OR p = ANY (k.shared_with))
       FOR SHARE OF k;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no such conversation' USING ERRCODE = 'ASNFD';
    END IF;
    SELECT m.seq INTO target_seq FROM __S__.messages m
     WHERE m.tenant = t AND m.session_id = s AND m.message_id = mid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no message % in this conversation', mid USING ERRCODE = 'ASNFD';
    END IF;
    LOOP
        SELECT * INTO h FROM __S__.lock_header(t, new_s, ttl);
        IF h.state <> 'absent' THEN
            RAISE EXCEPTION 'the branch''s key is already in use' USING ERRCODE = 'ASCON';
        END IF;
        EXIT WHEN __S__.claim_header(t, new_s, p, NULL, ttl);
    END LOOP;
    now_ := clock_timestamp();
    WITH ins AS (
        INSERT INTO __S__.messages (tenant, session_id, seq, message_id, role, content,
                                    metadata, compaction, user_pos, assistant_pos, turn_pos,
                                    created_at, nonce)
        SELECT t, new_s, m.seq, replace(gen_random_uuid()::text, '-', ''), m.role, m.content,
               m.metadata, m.compaction, m.user_pos, m.assistant_pos, m.turn_pos, now_, n
          FROM __S__.messages m
         WHERE m.tenant = t AND m.session_id = s AND m.seq >= 0 AND m.seq <= target_seq
        RETURNING seq, message_id, role
    )
    SELECT count(*) AS total,
           count(*) FILTER (WHERE ins.role = 'user') AS users,
           count(*) FILTER (WHERE ins.role = 'assistant') AS assistants,
           (SELECT i.message_id FROM ins i ORDER BY i.seq DESC LIMIT 1) AS tail
      INTO copied FROM ins;
    INSERT INTO __S__.conversations (tenant, session_id, owner, title, created_at, updated_at,
                                     tail_message_id, message_count, user_count,
                                     assistant_count, turn_count, last_message_at, nonce,
                                     metadata)
    VALUES (t, new_s, p, src.title, now_, now_, copied.tail, copied.total, copied.users,
            copied.assistants, copied.users + copied.assistants, now_, n, src.metadata);
    INSERT INTO __S__.owner_counts AS oc (tenant, owner, conversations) VALUES (t, p, 1)
    ON CONFLICT (tenant, owner) DO UPDATE SET conversations = oc.conversations + 1;
    UPDATE __S__.keys SET nonce = n WHERE tenant = t AND session_id = new_s;
END
$fn$;
