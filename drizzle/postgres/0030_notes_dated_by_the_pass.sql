-- The notes join the lists' watermark (0026; docs/scaling-out.md "The watermark"): a note is inserted under no lock,
-- its id drawn after its transaction took its transaction id, its createdAt the time its writer proposes (`now`, or
-- 1 µs after the newest note its snapshot sees: src/db/monotonic.ts `createdAtAfterLatest`). The lists' pass dates the
-- notes it lists, in id order per environment: each keeps its time unless it must move to 1 µs after the newest note
-- before it; a note that moves takes its first message (and anything written to it before it was listed) along, so
-- that its updatedAt, archivedAt and message times never fall before its createdAt. An import's note whose time the
-- file gives is kept at that time (notes_kept_times): when it is not after the notes before it, the environment's notes
-- are out of time order from then on (environments.notes_in_time_order), as the import itself would have said.
CREATE TABLE notes_kept_times (
  note_id int8 PRIMARY KEY
);
--> statement-breakpoint
CREATE FUNCTION trellis_date_notes(from_id int8, to_id int8) RETURNS int8 LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  note record; env int8; prev_at int8; at int8; moved int8 := 0;
  ids int8[] := '{}'; ats int8[] := '{}'; out_of_order int8[] := '{}';
BEGIN
  -- Environment by environment, each in id order: one seek of the newest listed note per environment and pass.
  FOR note IN SELECT n.id, n.environment_id, n.created_at, k.note_id IS NOT NULL AS kept FROM notes n
      LEFT JOIN notes_kept_times k ON k.note_id = n.id
      WHERE n.id > from_id AND n.id <= to_id ORDER BY n.environment_id, n.id LOOP
    IF env IS DISTINCT FROM note.environment_id THEN
      env := note.environment_id;
      SELECT n.created_at INTO prev_at FROM notes n WHERE n.environment_id = env AND n.id <= from_id ORDER BY n.created_at DESC LIMIT 1;
    END IF;
    IF note.kept THEN
      IF prev_at IS NOT NULL AND note.created_at < prev_at THEN out_of_order := out_of_order || env; END IF;
      prev_at := greatest(prev_at, note.created_at);
      CONTINUE;
    END IF;
    at := CASE WHEN prev_at IS NOT NULL AND note.created_at <= prev_at THEN prev_at + 1 ELSE note.created_at END;
    IF at <> note.created_at THEN
      moved := moved + 1; ids := ids || note.id; ats := ats || at;
    END IF;
    prev_at := at;
  END LOOP;
  IF moved > 0 THEN
    UPDATE notes n SET created_at = c.at, updated_at = greatest(n.updated_at, c.at),
        archived_at = CASE WHEN n.archived_at IS NULL THEN NULL ELSE greatest(n.archived_at, c.at) END
      FROM unnest(ids, ats) AS c(id, at) WHERE n.id = c.id;
    UPDATE note_messages m SET created_at = c.at FROM unnest(ids, ats) AS c(id, at) WHERE m.note_id = c.id AND m.created_at < c.at;
  END IF;
  IF cardinality(out_of_order) > 0 THEN
    UPDATE environments SET notes_in_time_order = false WHERE id = ANY(out_of_order) AND notes_in_time_order;
  END IF;
  DELETE FROM notes_kept_times WHERE note_id > from_id AND note_id <= to_id;
  RETURN moved;
END $$;
--> statement-breakpoint
ALTER TABLE notes ALTER COLUMN id SET DEFAULT trellis_sequenced_id('notes_id_seq');--> statement-breakpoint
-- Every note written before this migration was dated under the environment's lock: all listed.
INSERT INTO list_sequencer (list, seq, dating, through)
  VALUES ('notes', 'notes_id_seq', 'trellis_date_notes', coalesce(pg_sequence_last_value('notes_id_seq'), 0));
