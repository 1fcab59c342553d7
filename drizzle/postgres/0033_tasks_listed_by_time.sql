DROP INDEX "tasks_env_id_idx";--> statement-breakpoint
DROP INDEX "task_assignees_team_idx";--> statement-breakpoint
DROP INDEX "task_assignees_user_idx";--> statement-breakpoint
DROP INDEX "tasks_env_created_idx";--> statement-breakpoint
DROP INDEX "tasks_open_env_idx";--> statement-breakpoint
DROP INDEX "tasks_env_record_idx";--> statement-breakpoint
-- Each assignee takes its task's created_at (a person's tasks are walked from their assignments in the lists' order).
ALTER TABLE "task_assignees" ADD COLUMN "task_created_at" bigint;--> statement-breakpoint
UPDATE "task_assignees" a SET "task_created_at" = k."created_at" FROM "tasks" k WHERE k."id" = a."task_id";--> statement-breakpoint
ALTER TABLE "task_assignees" ALTER COLUMN "task_created_at" SET NOT NULL;--> statement-breakpoint
CREATE INDEX "task_assignees_team_idx" ON "task_assignees" USING btree ("team_id","task_created_at","task_id") WHERE team_id is not null;--> statement-breakpoint
CREATE INDEX "task_assignees_user_idx" ON "task_assignees" USING btree ("user_id","task_created_at","task_id") WHERE user_id is not null;--> statement-breakpoint
CREATE INDEX "tasks_env_created_idx" ON "tasks" USING btree ("environment_id","created_at","id");--> statement-breakpoint
CREATE INDEX "tasks_open_env_idx" ON "tasks" USING btree ("environment_id","created_at","id") WHERE status = 'open';--> statement-breakpoint
CREATE INDEX "tasks_env_record_idx" ON "tasks" USING btree ("environment_id","record_id","created_at","id");--> statement-breakpoint
-- The tasks join the lists' watermark, as the runs did (0032): a task is opened under no lock with the time its writer
-- proposes (src/db/monotonic.ts `nextCreatedAt`: max(now, the environment's newest task its snapshot sees + 1 µs)), its
-- id a UUIDv7 of that time, and a row in tasks_unlisted whose position is drawn after its transaction took its
-- transaction id. The pass dates the tasks of the positions it lists, per environment in position order (each keeps
-- its time unless it must move to 1 µs after the newest listed task before it; its assignees' copy moves along), then
-- deletes their rows; readers list a task once it has none.
CREATE SEQUENCE tasks_list_seq CACHE 1;
--> statement-breakpoint
CREATE TABLE tasks_unlisted (
  seq int8 PRIMARY KEY DEFAULT trellis_sequenced_id('tasks_list_seq'),
  task_id text NOT NULL
);
--> statement-breakpoint
CREATE INDEX tasks_unlisted_task_idx ON tasks_unlisted (task_id);
--> statement-breakpoint
CREATE FUNCTION trellis_date_tasks(from_seq int8, to_seq int8) RETURNS int8 LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  task record; env int8; prev_at int8; at int8; moved int8 := 0;
  ids text[] := '{}'; ats int8[] := '{}';
BEGIN
  FOR task IN SELECT k.id, k.environment_id, k.created_at FROM tasks_unlisted u JOIN tasks k ON k.id = u.task_id
      WHERE u.seq > from_seq AND u.seq <= to_seq ORDER BY k.environment_id, u.seq LOOP
    IF env IS DISTINCT FROM task.environment_id THEN
      env := task.environment_id;
      SELECT k.created_at INTO prev_at FROM tasks k WHERE k.environment_id = env
          AND NOT EXISTS (SELECT 1 FROM tasks_unlisted u WHERE u.task_id = k.id)
        ORDER BY k.created_at DESC LIMIT 1;
    END IF;
    at := CASE WHEN prev_at IS NOT NULL AND task.created_at <= prev_at THEN prev_at + 1 ELSE task.created_at END;
    IF at <> task.created_at THEN
      moved := moved + 1; ids := ids || task.id; ats := ats || at;
    END IF;
    prev_at := at;
  END LOOP;
  IF moved > 0 THEN
    -- Locked in id order first: an escalation (which updates its task before it adds assignees) then either waits for
    -- this pass and copies the new time, or is waited for and its assignees are moved with the others.
    PERFORM 1 FROM tasks k WHERE k.id = ANY(ids) ORDER BY k.id FOR UPDATE;
    UPDATE tasks k SET created_at = c.at FROM unnest(ids, ats) AS c(id, at) WHERE k.id = c.id;
    UPDATE task_assignees a SET task_created_at = c.at FROM unnest(ids, ats) AS c(id, at) WHERE a.task_id = c.id;
  END IF;
  DELETE FROM tasks_unlisted WHERE seq > from_seq AND seq <= to_seq;
  RETURN moved;
END $$;
--> statement-breakpoint
-- Every task opened before this migration was dated under the environment's lock: all listed.
INSERT INTO list_sequencer (list, seq, dating, through) VALUES ('tasks', 'tasks_list_seq', 'trellis_date_tasks', 0);
