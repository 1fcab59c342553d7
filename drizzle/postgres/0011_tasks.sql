CREATE TABLE "task_assignees" (
	"task_id" text NOT NULL,
	"team_id" bigint,
	"user_id" bigint,
	"escalated" boolean DEFAULT false NOT NULL,
	CONSTRAINT "task_assignees_one_subject_check" CHECK ((team_id is null) <> (user_id is null))
);
--> statement-breakpoint
CREATE TABLE "task_decisions" (
	"task_id" text NOT NULL,
	"user_id" bigint NOT NULL,
	"decision" text NOT NULL,
	"comment" text,
	"input" text,
	"idempotency_key" text,
	"request_hash" text,
	"created_at" bigint NOT NULL,
	CONSTRAINT "task_decisions_task_id_user_id_pk" PRIMARY KEY("task_id","user_id"),
	CONSTRAINT "task_decisions_decision_check" CHECK ("task_decisions"."decision" in ('approve', 'reject'))
);
--> statement-breakpoint
CREATE TABLE "tasks" (
	"id" text PRIMARY KEY NOT NULL,
	"run_id" text NOT NULL,
	"step_index" bigint NOT NULL,
	"step_name" text NOT NULL,
	"environment_id" bigint NOT NULL,
	"workflow_id" bigint NOT NULL,
	"team_id" bigint NOT NULL,
	"collection_id" bigint,
	"record_id" text NOT NULL,
	"requester_id" bigint NOT NULL,
	"title" text NOT NULL,
	"approvals_required" bigint NOT NULL,
	"allow_requester" boolean DEFAULT false NOT NULL,
	"form" text,
	"status" text NOT NULL,
	"due_at" bigint,
	"on_timeout" text DEFAULT 'fail' NOT NULL,
	"escalate_to" text,
	"escalated" boolean DEFAULT false NOT NULL,
	"created_at" bigint NOT NULL,
	"closed_at" bigint,
	CONSTRAINT "tasks_status_check" CHECK ((status = 'open' OR status = 'approved' OR status = 'rejected' OR status = 'expired' OR status = 'cancelled'))
);
--> statement-breakpoint
ALTER TABLE "task_assignees" ADD CONSTRAINT "task_assignees_task_id_tasks_id_fk" FOREIGN KEY ("task_id") REFERENCES "public"."tasks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "task_assignees" ADD CONSTRAINT "task_assignees_team_id_teams_id_fk" FOREIGN KEY ("team_id") REFERENCES "public"."teams"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "task_assignees" ADD CONSTRAINT "task_assignees_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "task_decisions" ADD CONSTRAINT "task_decisions_task_id_tasks_id_fk" FOREIGN KEY ("task_id") REFERENCES "public"."tasks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "task_decisions" ADD CONSTRAINT "task_decisions_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tasks" ADD CONSTRAINT "tasks_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tasks" ADD CONSTRAINT "tasks_environment_id_environments_id_fk" FOREIGN KEY ("environment_id") REFERENCES "public"."environments"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tasks" ADD CONSTRAINT "tasks_workflow_id_workflows_id_fk" FOREIGN KEY ("workflow_id") REFERENCES "public"."workflows"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tasks" ADD CONSTRAINT "tasks_team_id_teams_id_fk" FOREIGN KEY ("team_id") REFERENCES "public"."teams"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tasks" ADD CONSTRAINT "tasks_collection_id_collections_id_fk" FOREIGN KEY ("collection_id") REFERENCES "public"."collections"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tasks" ADD CONSTRAINT "tasks_requester_id_users_id_fk" FOREIGN KEY ("requester_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "task_assignees_team_unique" ON "task_assignees" USING btree ("task_id","team_id") WHERE team_id is not null;--> statement-breakpoint
CREATE UNIQUE INDEX "task_assignees_user_unique" ON "task_assignees" USING btree ("task_id","user_id") WHERE user_id is not null;--> statement-breakpoint
CREATE INDEX "task_assignees_team_idx" ON "task_assignees" USING btree ("team_id","task_id") WHERE team_id is not null;--> statement-breakpoint
CREATE INDEX "task_assignees_user_idx" ON "task_assignees" USING btree ("user_id","task_id") WHERE user_id is not null;--> statement-breakpoint
CREATE UNIQUE INDEX "tasks_run_step_unique" ON "tasks" USING btree ("run_id","step_index");--> statement-breakpoint
CREATE INDEX "tasks_env_id_idx" ON "tasks" USING btree ("environment_id","id");--> statement-breakpoint
CREATE INDEX "tasks_env_created_idx" ON "tasks" USING btree ("environment_id","created_at");--> statement-breakpoint
CREATE INDEX "tasks_due_idx" ON "tasks" USING btree ("due_at") WHERE status = 'open' and due_at is not null;