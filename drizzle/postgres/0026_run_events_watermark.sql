-- The lists' watermark (docs/workflows.md "The order guarantee on PostgreSQL"): rows take their ids from a sequence at
-- insert, under no lock, after their transaction has taken its transaction id; readers read at or below the list's
-- watermark, which a pass moves only over ids no transaction can still commit. Run events are its first list.
CREATE FUNCTION trellis_sequenced_id(seq regclass) RETURNS int8 LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM pg_current_xact_id(); -- the transaction's id before the draw: what a settled mark relies on
  RETURN nextval(seq);
END $$;
--> statement-breakpoint
-- A list: its sequence (CACHE 1: its newest draw is every session's), the function that dates its rows in ($1, $2]
-- (null: rows with no listed time), its watermark, and its pending marks (the newest draw a pass saw, and that pass's
-- transaction id), oldest first.
CREATE TABLE list_sequencer (
  list text PRIMARY KEY,
  seq regclass NOT NULL,
  dating text,
  through int8 NOT NULL DEFAULT 0,
  marks_through int8[] NOT NULL DEFAULT '{}',
  marks_xid xid8[] NOT NULL DEFAULT '{}'
);
--> statement-breakpoint
-- One pass over every list, one at a time (a transaction-level try-lock: nothing held past the call, so it runs
-- through a transaction pooler). Its first statement, before the pass holds a transaction id, reads each list's newest
-- draw and counts its settled marks (a mark whose transaction id is below the oldest one still running: every
-- transaction that drew at or below it has ended). Then per list: date and list up to the newest settled mark, and
-- add the mark (newest draw, this pass's transaction id) when there are new draws. A row per list: what it listed,
-- the rows whose time moved, the marks left pending.
CREATE FUNCTION trellis_list_pass(lock_key int8, max_marks int4)
  RETURNS TABLE (listed text, listed_from int8, listed_to int8, moved int8, pending int4) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  names text[]; throughs int8[]; datings text[]; lasts int8[]; settleds int4[];
  marks int8[]; settled int4; upto int8; newest int8; add_mark boolean;
BEGIN
  IF NOT pg_try_advisory_xact_lock(lock_key) THEN RETURN; END IF;
  -- One statement into arrays, not a loop over a query: a loop would read the later lists' draws after this pass's
  -- first write had taken its transaction id.
  SELECT array_agg(l.list ORDER BY l.list), array_agg(l.through ORDER BY l.list), array_agg(l.dating ORDER BY l.list),
      array_agg(coalesce(pg_sequence_last_value(l.seq), 0) ORDER BY l.list),
      array_agg((SELECT count(*) FROM unnest(l.marks_xid) x WHERE x < pg_snapshot_xmin(pg_current_snapshot()))::int4 ORDER BY l.list)
    INTO names, throughs, datings, lasts, settleds FROM list_sequencer l;
  FOR i IN 1 .. coalesce(cardinality(names), 0) LOOP
    SELECT l.marks_through INTO marks FROM list_sequencer l WHERE l.list = names[i];
    settled := settleds[i];
    upto := CASE WHEN settled > 0 THEN marks[settled] ELSE throughs[i] END;
    moved := 0;
    IF settled > 0 AND datings[i] IS NOT NULL THEN
      EXECUTE format('SELECT %s($1, $2)', datings[i]) INTO moved USING throughs[i], upto;
    END IF;
    newest := coalesce(marks[cardinality(marks)], throughs[i]);
    add_mark := lasts[i] > newest AND cardinality(marks) - settled < max_marks;
    IF settled > 0 OR add_mark THEN
      -- The mark's transaction id is taken here at the latest, after the first statement's read.
      UPDATE list_sequencer l SET through = upto,
          marks_through = l.marks_through[settled + 1:] || CASE WHEN add_mark THEN ARRAY[lasts[i]] ELSE '{}'::int8[] END,
          marks_xid = l.marks_xid[settled + 1:] || CASE WHEN add_mark THEN ARRAY[pg_current_xact_id()] ELSE '{}'::xid8[] END
        WHERE l.list = names[i];
    END IF;
    listed := names[i]; listed_from := throughs[i]; listed_to := upto;
    pending := cardinality(marks) - settled + CASE WHEN add_mark THEN 1 ELSE 0 END;
    RETURN NEXT;
  END LOOP;
END $$;
--> statement-breakpoint
ALTER TABLE run_events ALTER COLUMN id SET DEFAULT trellis_sequenced_id('run_events_id_seq');
--> statement-breakpoint
-- Every event written before this migration committed under the environment's lock: all listed.
INSERT INTO list_sequencer (list, seq, through) VALUES ('run_events', 'run_events_id_seq', coalesce(pg_sequence_last_value('run_events_id_seq'), 0));
