ALTER TABLE "runs" DROP CONSTRAINT "runs_status_check";--> statement-breakpoint
DROP INDEX "runs_one_active_per_record";--> statement-breakpoint
DROP INDEX "runs_finished_idx";--> statement-breakpoint
CREATE UNIQUE INDEX "runs_one_active_per_record" ON "runs" USING btree ("workflow_id","record_id") WHERE (status = 'queued' OR status = 'running' OR status = 'waiting');--> statement-breakpoint
CREATE INDEX "runs_finished_idx" ON "runs" USING btree ("finished_at") WHERE (status = 'succeeded' OR status = 'failed' OR status = 'cancelled');--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_status_check" CHECK ((status = 'queued' OR status = 'running' OR status = 'waiting' OR status = 'succeeded' OR status = 'failed' OR status = 'cancelled'));