CREATE TABLE "schedule_ticks" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"workflow_id" bigint NOT NULL,
	"fire_at" bigint NOT NULL,
	"cursor" text,
	"started" bigint DEFAULT 0 NOT NULL,
	"skipped" bigint DEFAULT 0 NOT NULL,
	"failed" bigint DEFAULT 0 NOT NULL,
	"warning" text,
	"lease_owner" text,
	"lease_expires_at" bigint,
	"created_at" bigint NOT NULL,
	"finished_at" bigint
);
--> statement-breakpoint
CREATE TABLE "workflow_schedules" (
	"workflow_id" bigint PRIMARY KEY NOT NULL,
	"cron" text NOT NULL,
	"timezone" text NOT NULL,
	"records_where" text NOT NULL,
	"records_limit" bigint NOT NULL,
	"run_as_user_id" bigint NOT NULL,
	"catch_up" text NOT NULL,
	"enabled" boolean NOT NULL,
	"next_fire_at" bigint,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL,
	CONSTRAINT "workflow_schedules_catch_up_check" CHECK ("workflow_schedules"."catch_up" in ('once', 'skip'))
);
--> statement-breakpoint
ALTER TABLE "runs" DROP CONSTRAINT "runs_trigger_check";--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "scheduled_for" bigint;--> statement-breakpoint
ALTER TABLE "schedule_ticks" ADD CONSTRAINT "schedule_ticks_workflow_id_workflows_id_fk" FOREIGN KEY ("workflow_id") REFERENCES "public"."workflows"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_schedules" ADD CONSTRAINT "workflow_schedules_workflow_id_workflows_id_fk" FOREIGN KEY ("workflow_id") REFERENCES "public"."workflows"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_schedules" ADD CONSTRAINT "workflow_schedules_run_as_user_id_users_id_fk" FOREIGN KEY ("run_as_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "schedule_ticks_workflow_fire_unique" ON "schedule_ticks" USING btree ("workflow_id","fire_at");--> statement-breakpoint
CREATE INDEX "schedule_ticks_open_idx" ON "schedule_ticks" USING btree ("lease_expires_at") WHERE finished_at IS NULL;--> statement-breakpoint
CREATE INDEX "workflow_schedules_due_idx" ON "workflow_schedules" USING btree ("next_fire_at");--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_trigger_check" CHECK ("runs"."trigger" in ('manual', 'webhook', 'schedule', 'event'));