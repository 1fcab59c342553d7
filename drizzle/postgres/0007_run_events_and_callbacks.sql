CREATE TABLE "callback_attempts" (
	"delivery_id" text NOT NULL,
	"attempt" bigint NOT NULL,
	"started_at" bigint NOT NULL,
	"duration_ms" bigint NOT NULL,
	"status_code" bigint,
	"error" text,
	CONSTRAINT "callback_attempts_delivery_id_attempt_pk" PRIMARY KEY("delivery_id","attempt")
);
--> statement-breakpoint
CREATE TABLE "callback_deliveries" (
	"id" text PRIMARY KEY NOT NULL,
	"endpoint_id" text NOT NULL,
	"run_id" text NOT NULL,
	"type" text NOT NULL,
	"payload" text NOT NULL,
	"status" text NOT NULL,
	"attempts" bigint DEFAULT 0 NOT NULL,
	"next_attempt_at" bigint NOT NULL,
	"lease_owner" text,
	"lease_expires_at" bigint,
	"created_at" bigint NOT NULL,
	"finished_at" bigint,
	CONSTRAINT "callback_deliveries_status_check" CHECK ("callback_deliveries"."status" in ('pending', 'succeeded', 'failed'))
);
--> statement-breakpoint
CREATE TABLE "callback_endpoints" (
	"id" text PRIMARY KEY NOT NULL,
	"workflow_id" bigint NOT NULL,
	"url" text NOT NULL,
	"events" text NOT NULL,
	"secret_salt" text NOT NULL,
	"created_by" bigint,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "run_events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"run_id" text NOT NULL,
	"environment_id" bigint NOT NULL,
	"workflow_id" bigint NOT NULL,
	"record_id" text NOT NULL,
	"sequence" bigint NOT NULL,
	"type" text NOT NULL,
	"status" text NOT NULL,
	"step_index" bigint,
	"step_name" text,
	"data" text,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "callback_attempts" ADD CONSTRAINT "callback_attempts_delivery_id_callback_deliveries_id_fk" FOREIGN KEY ("delivery_id") REFERENCES "public"."callback_deliveries"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "callback_deliveries" ADD CONSTRAINT "callback_deliveries_endpoint_id_callback_endpoints_id_fk" FOREIGN KEY ("endpoint_id") REFERENCES "public"."callback_endpoints"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "callback_deliveries" ADD CONSTRAINT "callback_deliveries_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "callback_endpoints" ADD CONSTRAINT "callback_endpoints_workflow_id_workflows_id_fk" FOREIGN KEY ("workflow_id") REFERENCES "public"."workflows"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "callback_endpoints" ADD CONSTRAINT "callback_endpoints_created_by_users_id_fk" FOREIGN KEY ("created_by") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "run_events" ADD CONSTRAINT "run_events_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "callback_deliveries_due_idx" ON "callback_deliveries" USING btree ("next_attempt_at") WHERE status = 'pending';--> statement-breakpoint
CREATE INDEX "callback_deliveries_run_idx" ON "callback_deliveries" USING btree ("run_id");--> statement-breakpoint
CREATE INDEX "callback_endpoints_workflow_idx" ON "callback_endpoints" USING btree ("workflow_id");--> statement-breakpoint
CREATE UNIQUE INDEX "run_events_run_sequence_idx" ON "run_events" USING btree ("run_id","sequence");--> statement-breakpoint
CREATE INDEX "run_events_env_id_idx" ON "run_events" USING btree ("environment_id","id");