DROP INDEX "tasks_due_idx";--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "remind_at" bigint;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "reminded_at" bigint;--> statement-breakpoint
CREATE INDEX "tasks_remind_idx" ON "tasks" USING btree ("remind_at") WHERE status = 'open' and remind_at is not null;--> statement-breakpoint
CREATE INDEX "tasks_due_idx" ON "tasks" USING btree ("due_at") WHERE status = 'open' and due_at is not null and not escalated;