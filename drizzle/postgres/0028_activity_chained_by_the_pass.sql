-- The activity log joins the lists' watermark (0026; docs/scaling-out.md "The watermark"): an entry is inserted under
-- no lock, its id drawn after its transaction took its transaction id, its createdAt the time its writer proposes,
-- unchained (chain_position null) with its canonical encoding's tail in chain_hash — every field after createdAt
-- (src/lib/audit-chain.ts `activityChainTail`). The lists' pass chains the entries it lists, in id order per
-- environment: each keeps its time unless it must move to 1 µs after the entry before it, takes the next position,
-- and its hash over the previous one's; the reads of the log stop at the watermark, so an unchained entry is never read.
CREATE FUNCTION trellis_chain_activity(from_id int8, to_id int8) RETURNS int8 LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  entry record; env int8; link text; at int8; prev_at int8; prev_position int8; prev_hash bytea; moved int8 := 0;
  ids int8[] := '{}'; ats int8[] := '{}'; positions int8[] := '{}'; hashes text[] := '{}';
BEGIN
  -- Environment by environment, each in id order: one seek of its head per pass, not one per entry. An entry with no
  -- tail was not written by Trellis (someone with the database's password): it stays unchained, and `trellis audit
  -- verify` reports it.
  FOR entry IN SELECT id, environment_id, created_at, chain_hash AS tail FROM activity_logs
      WHERE id > from_id AND id <= to_id AND chain_position IS NULL AND chain_hash IS NOT NULL ORDER BY environment_id, id LOOP
    IF env IS DISTINCT FROM entry.environment_id THEN
      env := entry.environment_id;
      SELECT created_at, chain_position, chain_hash INTO prev_at, prev_position, link FROM activity_logs
        WHERE environment_id = env AND chain_position IS NOT NULL ORDER BY chain_position DESC LIMIT 1;
      IF NOT FOUND THEN
        -- No entry left (or none yet): the chain goes on from its newest retention anchor, or starts at position 1.
        prev_at := NULL;
        SELECT position, hash INTO prev_position, link FROM audit_checkpoints
          WHERE scope_key = 'activity:' || env AND kind = 'anchor' ORDER BY position DESC LIMIT 1;
        IF NOT FOUND THEN prev_position := 0; link := repeat('0', 64); END IF;
      END IF;
      -- A head whose hash is not one (tampered with: verify reports it) is chained on from all the same: a pass that
      -- failed would hold every list back.
      prev_hash := CASE WHEN link ~ '^[0-9a-f]{64}$' THEN decode(link, 'hex') ELSE sha256(convert_to(coalesce(link, ''), 'UTF8')) END;
    END IF;
    at := CASE WHEN prev_at IS NOT NULL AND entry.created_at <= prev_at THEN prev_at + 1 ELSE entry.created_at END;
    IF at <> entry.created_at THEN moved := moved + 1; END IF;
    prev_at := at;
    prev_position := prev_position + 1;
    prev_hash := sha256(prev_hash || convert_to('[1,"activity",' || env || ',' || prev_position || ',' || entry.id || ',' || at || ',' || entry.tail, 'UTF8'));
    ids := ids || entry.id; ats := ats || at; positions := positions || prev_position; hashes := hashes || encode(prev_hash, 'hex');
  END LOOP;
  -- One update for them all.
  UPDATE activity_logs l SET created_at = c.at, chain_position = c.position, chain_hash = c.hash
    FROM unnest(ids, ats, positions, hashes) AS c(id, at, position, hash) WHERE l.id = c.id;
  RETURN moved;
END $$;
--> statement-breakpoint
-- Entries stay append-only but for the one update the pass makes: an unchained entry gets its time, position and hash.
CREATE FUNCTION trellis_refuse_log_update_but_chaining() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.chain_position IS NULL AND NEW.chain_position IS NOT NULL AND NEW.created_at >= OLD.created_at
      AND to_jsonb(NEW) - ARRAY['created_at', 'chain_position', 'chain_hash'] = to_jsonb(OLD) - ARRAY['created_at', 'chain_position', 'chain_hash'] THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION '% entries are append-only', TG_ARGV[0];
END;
$$;--> statement-breakpoint
DROP TRIGGER activity_logs_append_only ON activity_logs;--> statement-breakpoint
CREATE TRIGGER activity_logs_append_only BEFORE UPDATE ON activity_logs
  FOR EACH ROW EXECUTE FUNCTION trellis_refuse_log_update_but_chaining('activity log');--> statement-breakpoint
ALTER TABLE activity_logs ALTER COLUMN id SET DEFAULT trellis_sequenced_id('activity_logs_id_seq');--> statement-breakpoint
-- Every entry written before this migration was chained under the environment's lock: all listed.
INSERT INTO list_sequencer (list, seq, dating, through)
  VALUES ('activity_logs', 'activity_logs_id_seq', 'trellis_chain_activity', coalesce(pg_sequence_last_value('activity_logs_id_seq'), 0));
