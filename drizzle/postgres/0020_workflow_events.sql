CREATE TABLE "workflow_event_triggers" (
	"workflow_id" bigint PRIMARY KEY NOT NULL,
	"environment_id" bigint NOT NULL,
	"collection_id" bigint NOT NULL,
	"events" text NOT NULL,
	"filter" text,
	"run_as_user_id" bigint NOT NULL,
	"debounce_seconds" bigint,
	"received" bigint DEFAULT 0 NOT NULL,
	"started" bigint DEFAULT 0 NOT NULL,
	"skipped" bigint DEFAULT 0 NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "workflow_events" (
	"id" text PRIMARY KEY NOT NULL,
	"workflow_id" bigint NOT NULL,
	"record_key" text NOT NULL,
	"event" text NOT NULL,
	"changed_fields" text,
	"note_id" bigint,
	"chain" text NOT NULL,
	"status" text NOT NULL,
	"attempts" bigint DEFAULT 0 NOT NULL,
	"next_attempt_at" bigint NOT NULL,
	"lease_owner" text,
	"lease_expires_at" bigint,
	"created_at" bigint NOT NULL,
	"finished_at" bigint,
	CONSTRAINT "workflow_events_status_check" CHECK ("workflow_events"."status" in ('pending', 'failed'))
);
--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "cause" text;--> statement-breakpoint
ALTER TABLE "workflow_event_triggers" ADD CONSTRAINT "workflow_event_triggers_workflow_id_workflows_id_fk" FOREIGN KEY ("workflow_id") REFERENCES "public"."workflows"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_event_triggers" ADD CONSTRAINT "workflow_event_triggers_environment_id_environments_id_fk" FOREIGN KEY ("environment_id") REFERENCES "public"."environments"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_event_triggers" ADD CONSTRAINT "workflow_event_triggers_collection_id_collections_id_fk" FOREIGN KEY ("collection_id") REFERENCES "public"."collections"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_event_triggers" ADD CONSTRAINT "workflow_event_triggers_run_as_user_id_users_id_fk" FOREIGN KEY ("run_as_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_events" ADD CONSTRAINT "workflow_events_workflow_id_workflows_id_fk" FOREIGN KEY ("workflow_id") REFERENCES "public"."workflows"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "workflow_event_triggers_place_idx" ON "workflow_event_triggers" USING btree ("environment_id","collection_id");--> statement-breakpoint
CREATE INDEX "workflow_events_due_idx" ON "workflow_events" USING btree ("next_attempt_at") WHERE status = 'pending';--> statement-breakpoint
CREATE INDEX "workflow_events_record_idx" ON "workflow_events" USING btree ("workflow_id","record_key");