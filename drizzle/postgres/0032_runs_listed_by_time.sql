DROP INDEX "runs_env_id_idx";--> statement-breakpoint
DROP INDEX "runs_env_record_idx";--> statement-breakpoint
CREATE INDEX "runs_env_created_idx" ON "runs" USING btree ("environment_id","created_at","id");--> statement-breakpoint
CREATE INDEX "runs_env_record_created_idx" ON "runs" USING btree ("environment_id","record_id","created_at","id");--> statement-breakpoint
-- The runs join the lists' watermark (0026; docs/scaling-out.md "Runs dated by the pass"): a run is queued under no
-- lock, with the time its writer proposes (the trigger's, or 1 µs after the environment's newest run its snapshot
-- sees), and a row in runs_unlisted whose position is drawn after the transaction took its transaction id. A run's id
-- is a UUIDv7 made before its transaction, so it cannot follow an order decided later: the runs list orders by
-- (created_at, id), which the pass makes strictly increasing per environment. Readers list a run once it has no row
-- in runs_unlisted; the pass dates the runs of the positions it lists, per environment in position order (each keeps
-- its time unless it must move to 1 µs after the newest listed run before it), then deletes their rows.
CREATE SEQUENCE runs_list_seq CACHE 1;
--> statement-breakpoint
CREATE TABLE runs_unlisted (
  seq int8 PRIMARY KEY DEFAULT trellis_sequenced_id('runs_list_seq'),
  run_id text NOT NULL
);
--> statement-breakpoint
CREATE INDEX runs_unlisted_run_idx ON runs_unlisted (run_id);
--> statement-breakpoint
CREATE FUNCTION trellis_date_runs(from_seq int8, to_seq int8) RETURNS int8 LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  run record; env int8; prev_at int8; at int8; moved int8 := 0;
  ids text[] := '{}'; ats int8[] := '{}';
BEGIN
  -- Environment by environment, each in position order: one seek of the newest listed run per environment and pass.
  FOR run IN SELECT r.id, r.environment_id, r.created_at FROM runs_unlisted u JOIN runs r ON r.id = u.run_id
      WHERE u.seq > from_seq AND u.seq <= to_seq ORDER BY r.environment_id, u.seq LOOP
    IF env IS DISTINCT FROM run.environment_id THEN
      env := run.environment_id;
      SELECT r.created_at INTO prev_at FROM runs r WHERE r.environment_id = env
          AND NOT EXISTS (SELECT 1 FROM runs_unlisted u WHERE u.run_id = r.id)
        ORDER BY r.created_at DESC LIMIT 1;
    END IF;
    at := CASE WHEN prev_at IS NOT NULL AND run.created_at <= prev_at THEN prev_at + 1 ELSE run.created_at END;
    IF at <> run.created_at THEN
      moved := moved + 1; ids := ids || run.id; ats := ats || at;
    END IF;
    prev_at := at;
  END LOOP;
  IF moved > 0 THEN
    -- Locked in id order first, as every writer of several runs locks them: the pass never deadlocks with one.
    PERFORM 1 FROM runs r WHERE r.id = ANY(ids) ORDER BY r.id FOR UPDATE;
    UPDATE runs r SET created_at = c.at FROM unnest(ids, ats) AS c(id, at) WHERE r.id = c.id;
  END IF;
  DELETE FROM runs_unlisted WHERE seq > from_seq AND seq <= to_seq;
  RETURN moved;
END $$;
--> statement-breakpoint
-- A trigger's run, queued in one call (src/db/queue.ts `insertQueuedRunOnPostgres`) and under no lock: `created_at`
-- max(now, the environment's newest run its snapshot sees + 1 µs), the pass moves it when a run committed meanwhile
-- took that time; null when the id is taken or a partial unique index says no (`ON CONFLICT DO NOTHING`). The list
-- position is drawn first and `now` read right after it: the database's clock, in microseconds, when it reads within
-- a second after the caller's millisecond (the caller's is `available_at`, when the run is due), else the caller's
-- millisecond (a clock that is not the database's: a test's, which SQLite's insert stores as it is). So runs queued at
-- once propose distinct times in nearly the order of their positions, and the pass seldom has to move one.
DROP FUNCTION trellis_queue_run(int4, text, int8, int8, int8, text, int8, int8, text, int8, int8, text, int8, text, text);
--> statement-breakpoint
CREATE FUNCTION trellis_queue_run(p_id text, p_workflow_id int8, p_workflow_version_id int8, p_environment_id int8,
    p_record_id text, p_user_id int8, p_token_id int8, p_trigger text, p_now_ms int8, p_next_step int8, p_retry_of text,
    p_scheduled_for int8, p_cause text, p_trace_context text) RETURNS text
  LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  queued_id text;
  position int8 := trellis_sequenced_id('runs_list_seq');
  now_us int8 := floor(extract(epoch FROM clock_timestamp()) * 1000000)::int8;
BEGIN
  IF now_us < p_now_ms * 1000 OR now_us >= (p_now_ms + 1000) * 1000 THEN now_us := p_now_ms * 1000; END IF;
  INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, token_id, "trigger",
      status, next_step, available_at, attempts, created_at, retry_of, scheduled_for, cause, trace_context)
    VALUES (p_id, p_workflow_id, p_workflow_version_id, p_environment_id, p_record_id, p_user_id, p_token_id, p_trigger,
      'queued', p_next_step, p_now_ms, 0,
      greatest(now_us, coalesce((SELECT r.created_at FROM runs r WHERE r.environment_id = p_environment_id ORDER BY r.created_at DESC LIMIT 1), 0) + 1),
      p_retry_of, p_scheduled_for, p_cause, p_trace_context)
    ON CONFLICT DO NOTHING
    RETURNING id INTO queued_id;
  IF queued_id IS NOT NULL THEN
    INSERT INTO runs_unlisted (seq, run_id) VALUES (position, queued_id);
  END IF;
  RETURN queued_id;
END $$;
--> statement-breakpoint
-- Every run queued before this migration was dated under the environment's lock: all listed.
INSERT INTO list_sequencer (list, seq, dating, through) VALUES ('runs', 'runs_list_seq', 'trellis_date_runs', 0);
