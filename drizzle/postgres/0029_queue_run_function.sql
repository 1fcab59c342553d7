-- A trigger's run, queued in one call (src/db/queue.ts `insertQueuedRunOnPostgres`): the environment's runs lock, then
-- — a statement of its own, so that under READ COMMITTED its snapshot is taken with the lock held and sees what the
-- lock's previous holder committed — the environment's newest run and the run after it: `created_at` max(now, newest
-- + 1 µs), unless the run's id is not greater than the newest's (null, and the newest's id: the caller picks an id
-- after it) or a partial unique index says no (`ON CONFLICT DO NOTHING`: null). `now` is the caller's time — plus,
-- when the lock was held by another transaction, the whole milliseconds the call waited for it: a run is dated when it
-- can be listed, not a wait before (a lock granted at once adds nothing, so the time is the caller's exactly); it is
-- due from the caller's time (`available_at`: a clock that stands still, a test's, still finds it due). One round trip
-- where the lock and the insert took two, and no answer awaited between them while the lock is held.
CREATE FUNCTION trellis_queue_run(lock_key int4, p_id text, p_workflow_id int8, p_workflow_version_id int8, p_environment_id int8,
    p_record_id text, p_user_id int8, p_token_id int8, p_trigger text, p_now_ms int8, p_next_step int8, p_retry_of text,
    p_scheduled_for int8, p_cause text, p_trace_context text, OUT queued_id text, OUT newest_id text)
  LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  newest_at int8; asked timestamptz; now_ms int8 := p_now_ms;
BEGIN
  IF NOT pg_try_advisory_xact_lock(lock_key, p_environment_id::int4) THEN
    asked := clock_timestamp();
    PERFORM pg_advisory_xact_lock(lock_key, p_environment_id::int4);
    now_ms := p_now_ms + floor(extract(epoch FROM clock_timestamp() - asked) * 1000)::int8;
  END IF;
  SELECT r.id, r.created_at INTO newest_id, newest_at FROM runs r WHERE r.environment_id = p_environment_id ORDER BY r.id DESC LIMIT 1;
  IF newest_id IS NOT NULL AND newest_id >= p_id THEN RETURN; END IF;
  INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, token_id, "trigger",
      status, next_step, available_at, attempts, created_at, retry_of, scheduled_for, cause, trace_context)
    VALUES (p_id, p_workflow_id, p_workflow_version_id, p_environment_id, p_record_id, p_user_id, p_token_id, p_trigger,
      'queued', p_next_step, p_now_ms, 0, greatest(now_ms * 1000, coalesce(newest_at, 0) + 1), p_retry_of, p_scheduled_for, p_cause, p_trace_context)
    ON CONFLICT DO NOTHING
    RETURNING id INTO queued_id;
END $$;
