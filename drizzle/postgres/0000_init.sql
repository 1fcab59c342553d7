CREATE TABLE "activity_log_records" (
	"log_id" bigint NOT NULL,
	"environment_id" bigint NOT NULL,
	"record_id" text NOT NULL,
	CONSTRAINT "activity_log_records_log_id_record_id_pk" PRIMARY KEY("log_id","record_id")
);
--> statement-breakpoint
CREATE TABLE "activity_logs" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"environment_id" bigint NOT NULL,
	"type" text NOT NULL,
	"action" text NOT NULL,
	"label" text,
	"user_id" bigint NOT NULL,
	"team_id" bigint,
	"collection_id" bigint,
	"token_id" bigint,
	"workflow_name" text,
	"run_id" text,
	"step_name" text,
	"extension" boolean DEFAULT false NOT NULL,
	"created_at" bigint NOT NULL,
	CONSTRAINT "activity_logs_type_check" CHECK ("activity_logs"."type" in ('read', 'write'))
);
--> statement-breakpoint
CREATE TABLE "admin_logs" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"project_id" bigint,
	"type" text NOT NULL,
	"resource" text NOT NULL,
	"initiator" text NOT NULL,
	"user_id" bigint,
	"subject_user_id" bigint,
	"previous_value" text,
	"new_value" text,
	"extension" boolean DEFAULT false NOT NULL,
	"created_at" bigint NOT NULL,
	CONSTRAINT "admin_logs_type_check" CHECK ("admin_logs"."type" in ('add', 'remove', 'update', 'initial')),
	CONSTRAINT "admin_logs_initiator_check" CHECK ("admin_logs"."initiator" in ('administrator', 'identityProvider', 'system'))
);
--> statement-breakpoint
CREATE TABLE "api_tokens" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"user_id" bigint NOT NULL,
	"project_id" bigint NOT NULL,
	"token_hash" text NOT NULL,
	"prefix" text NOT NULL,
	"scopes" text NOT NULL,
	"created_with_sso" boolean DEFAULT false NOT NULL,
	"created_at" bigint NOT NULL,
	"last_used_at" bigint,
	"expires_at" bigint,
	"revoked_at" bigint
);
--> statement-breakpoint
CREATE TABLE "collection_permissions" (
	"collection_id" bigint NOT NULL,
	"team_id" bigint NOT NULL,
	"can_read" boolean DEFAULT true NOT NULL,
	"can_edit" boolean DEFAULT true NOT NULL,
	CONSTRAINT "collection_permissions_collection_id_team_id_pk" PRIMARY KEY("collection_id","team_id")
);
--> statement-breakpoint
CREATE TABLE "collections" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"project_id" bigint NOT NULL,
	"name" text NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "environments" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"project_id" bigint NOT NULL,
	"name" text NOT NULL,
	"notes_in_time_order" boolean DEFAULT true NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "instance_settings" (
	"name" text PRIMARY KEY NOT NULL,
	"value" text NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "invitations" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"token_hash" text NOT NULL,
	"user_id" bigint NOT NULL,
	"created_by" bigint,
	"created_at" bigint NOT NULL,
	"expires_at" bigint NOT NULL,
	"used_at" bigint
);
--> statement-breakpoint
CREATE TABLE "note_messages" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"note_id" bigint NOT NULL,
	"user_id" bigint NOT NULL,
	"content" text NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "notes" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"environment_id" bigint NOT NULL,
	"team_id" bigint NOT NULL,
	"collection_id" bigint,
	"record_id" text NOT NULL,
	"title" text NOT NULL,
	"user_id" bigint NOT NULL,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL,
	"archived_at" bigint
);
--> statement-breakpoint
CREATE TABLE "project_members" (
	"project_id" bigint NOT NULL,
	"user_id" bigint NOT NULL,
	"role" text NOT NULL,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL,
	CONSTRAINT "project_members_project_id_user_id_pk" PRIMARY KEY("project_id","user_id"),
	CONSTRAINT "project_members_role_check" CHECK ("project_members"."role" in ('admin', 'developer', 'editor', 'user', 'manager'))
);
--> statement-breakpoint
CREATE TABLE "projects" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"sso" boolean DEFAULT false NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "records" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"environment_id" bigint NOT NULL,
	"collection_id" bigint NOT NULL,
	"record_key" text NOT NULL,
	"data" text NOT NULL,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "renderings" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"environment_id" bigint NOT NULL,
	"team_id" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "run_steps" (
	"run_id" text NOT NULL,
	"step_index" bigint NOT NULL,
	"name" text NOT NULL,
	"type" text NOT NULL,
	"status" text NOT NULL,
	"attempts" bigint DEFAULT 1 NOT NULL,
	"output" text,
	"error" text,
	"started_at" bigint NOT NULL,
	"finished_at" bigint NOT NULL,
	CONSTRAINT "run_steps_run_id_step_index_pk" PRIMARY KEY("run_id","step_index")
);
--> statement-breakpoint
CREATE TABLE "runs" (
	"id" text PRIMARY KEY NOT NULL,
	"workflow_id" bigint NOT NULL,
	"workflow_version_id" bigint NOT NULL,
	"environment_id" bigint NOT NULL,
	"record_id" text NOT NULL,
	"user_id" bigint NOT NULL,
	"token_id" bigint,
	"trigger" text NOT NULL,
	"status" text NOT NULL,
	"next_step" bigint DEFAULT 0 NOT NULL,
	"available_at" bigint NOT NULL,
	"lease_owner" text,
	"lease_expires_at" bigint,
	"attempts" bigint DEFAULT 0 NOT NULL,
	"error" text,
	"created_at" bigint NOT NULL,
	"started_at" bigint,
	"finished_at" bigint,
	CONSTRAINT "runs_status_check" CHECK ("runs"."status" in ('queued', 'running', 'waiting', 'succeeded', 'failed', 'cancelled')),
	CONSTRAINT "runs_trigger_check" CHECK ("runs"."trigger" in ('manual', 'webhook'))
);
--> statement-breakpoint
CREATE TABLE "sessions" (
	"id_hash" text PRIMARY KEY NOT NULL,
	"user_id" bigint NOT NULL,
	"via_sso" boolean DEFAULT false NOT NULL,
	"created_at" bigint NOT NULL,
	"expires_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "team_members" (
	"team_id" bigint NOT NULL,
	"user_id" bigint NOT NULL,
	"created_at" bigint NOT NULL,
	CONSTRAINT "team_members_team_id_user_id_pk" PRIMARY KEY("team_id","user_id")
);
--> statement-breakpoint
CREATE TABLE "teams" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"project_id" bigint NOT NULL,
	"name" text NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "users" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"email" text NOT NULL,
	"username" text NOT NULL,
	"password_hash" text,
	"is_instance_admin" boolean DEFAULT false NOT NULL,
	"disabled_at" bigint,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhook_triggers" (
	"workflow_id" bigint PRIMARY KEY NOT NULL,
	"enabled" boolean DEFAULT false NOT NULL,
	"generation" bigint DEFAULT 1 NOT NULL,
	"rate_per_minute" bigint,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "workflow_versions" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"workflow_id" bigint NOT NULL,
	"version" bigint NOT NULL,
	"definition" text NOT NULL,
	"definition_hash" text NOT NULL,
	"published_by" bigint,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "workflows" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"rendering_id" bigint NOT NULL,
	"name" text NOT NULL,
	"collection_id" bigint NOT NULL,
	"active_version_id" bigint,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "activity_log_records" ADD CONSTRAINT "activity_log_records_log_id_activity_logs_id_fk" FOREIGN KEY ("log_id") REFERENCES "public"."activity_logs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "activity_logs" ADD CONSTRAINT "activity_logs_environment_id_environments_id_fk" FOREIGN KEY ("environment_id") REFERENCES "public"."environments"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "activity_logs" ADD CONSTRAINT "activity_logs_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "activity_logs" ADD CONSTRAINT "activity_logs_team_id_teams_id_fk" FOREIGN KEY ("team_id") REFERENCES "public"."teams"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "activity_logs" ADD CONSTRAINT "activity_logs_collection_id_collections_id_fk" FOREIGN KEY ("collection_id") REFERENCES "public"."collections"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "activity_logs" ADD CONSTRAINT "activity_logs_token_id_api_tokens_id_fk" FOREIGN KEY ("token_id") REFERENCES "public"."api_tokens"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "admin_logs" ADD CONSTRAINT "admin_logs_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "admin_logs" ADD CONSTRAINT "admin_logs_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "admin_logs" ADD CONSTRAINT "admin_logs_subject_user_id_users_id_fk" FOREIGN KEY ("subject_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "api_tokens" ADD CONSTRAINT "api_tokens_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "api_tokens" ADD CONSTRAINT "api_tokens_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "collection_permissions" ADD CONSTRAINT "collection_permissions_collection_id_collections_id_fk" FOREIGN KEY ("collection_id") REFERENCES "public"."collections"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "collection_permissions" ADD CONSTRAINT "collection_permissions_team_id_teams_id_fk" FOREIGN KEY ("team_id") REFERENCES "public"."teams"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "collections" ADD CONSTRAINT "collections_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "environments" ADD CONSTRAINT "environments_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "invitations" ADD CONSTRAINT "invitations_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "invitations" ADD CONSTRAINT "invitations_created_by_users_id_fk" FOREIGN KEY ("created_by") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "note_messages" ADD CONSTRAINT "note_messages_note_id_notes_id_fk" FOREIGN KEY ("note_id") REFERENCES "public"."notes"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "note_messages" ADD CONSTRAINT "note_messages_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "notes" ADD CONSTRAINT "notes_environment_id_environments_id_fk" FOREIGN KEY ("environment_id") REFERENCES "public"."environments"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "notes" ADD CONSTRAINT "notes_team_id_teams_id_fk" FOREIGN KEY ("team_id") REFERENCES "public"."teams"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "notes" ADD CONSTRAINT "notes_collection_id_collections_id_fk" FOREIGN KEY ("collection_id") REFERENCES "public"."collections"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "notes" ADD CONSTRAINT "notes_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "project_members" ADD CONSTRAINT "project_members_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "project_members" ADD CONSTRAINT "project_members_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "records" ADD CONSTRAINT "records_environment_id_environments_id_fk" FOREIGN KEY ("environment_id") REFERENCES "public"."environments"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "records" ADD CONSTRAINT "records_collection_id_collections_id_fk" FOREIGN KEY ("collection_id") REFERENCES "public"."collections"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "renderings" ADD CONSTRAINT "renderings_environment_id_environments_id_fk" FOREIGN KEY ("environment_id") REFERENCES "public"."environments"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "renderings" ADD CONSTRAINT "renderings_team_id_teams_id_fk" FOREIGN KEY ("team_id") REFERENCES "public"."teams"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "run_steps" ADD CONSTRAINT "run_steps_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_workflow_id_workflows_id_fk" FOREIGN KEY ("workflow_id") REFERENCES "public"."workflows"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_workflow_version_id_workflow_versions_id_fk" FOREIGN KEY ("workflow_version_id") REFERENCES "public"."workflow_versions"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_environment_id_environments_id_fk" FOREIGN KEY ("environment_id") REFERENCES "public"."environments"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_token_id_api_tokens_id_fk" FOREIGN KEY ("token_id") REFERENCES "public"."api_tokens"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sessions" ADD CONSTRAINT "sessions_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "team_members" ADD CONSTRAINT "team_members_team_id_teams_id_fk" FOREIGN KEY ("team_id") REFERENCES "public"."teams"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "team_members" ADD CONSTRAINT "team_members_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "teams" ADD CONSTRAINT "teams_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhook_triggers" ADD CONSTRAINT "webhook_triggers_workflow_id_workflows_id_fk" FOREIGN KEY ("workflow_id") REFERENCES "public"."workflows"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_versions" ADD CONSTRAINT "workflow_versions_workflow_id_workflows_id_fk" FOREIGN KEY ("workflow_id") REFERENCES "public"."workflows"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_versions" ADD CONSTRAINT "workflow_versions_published_by_users_id_fk" FOREIGN KEY ("published_by") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflows" ADD CONSTRAINT "workflows_rendering_id_renderings_id_fk" FOREIGN KEY ("rendering_id") REFERENCES "public"."renderings"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflows" ADD CONSTRAINT "workflows_collection_id_collections_id_fk" FOREIGN KEY ("collection_id") REFERENCES "public"."collections"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "activity_log_records_env_record_idx" ON "activity_log_records" USING btree ("environment_id","record_id","log_id");--> statement-breakpoint
CREATE INDEX "activity_logs_env_id_idx" ON "activity_logs" USING btree ("environment_id","id");--> statement-breakpoint
CREATE INDEX "activity_logs_env_documented_idx" ON "activity_logs" USING btree ("environment_id","id") WHERE extension = false;--> statement-breakpoint
CREATE INDEX "activity_logs_env_created_idx" ON "activity_logs" USING btree ("environment_id","created_at");--> statement-breakpoint
CREATE INDEX "admin_logs_project_id_idx" ON "admin_logs" USING btree ("project_id","id");--> statement-breakpoint
CREATE INDEX "admin_logs_project_documented_idx" ON "admin_logs" USING btree ("project_id","id") WHERE extension = false;--> statement-breakpoint
CREATE INDEX "admin_logs_project_created_idx" ON "admin_logs" USING btree ("project_id","created_at");--> statement-breakpoint
CREATE INDEX "admin_logs_project_user_idx" ON "admin_logs" USING btree ("project_id","user_id","id");--> statement-breakpoint
CREATE INDEX "admin_logs_project_type_idx" ON "admin_logs" USING btree ("project_id","type","id");--> statement-breakpoint
CREATE INDEX "admin_logs_project_resource_idx" ON "admin_logs" USING btree ("project_id","resource","id");--> statement-breakpoint
CREATE INDEX "admin_logs_project_initiator_idx" ON "admin_logs" USING btree ("project_id","initiator","id");--> statement-breakpoint
CREATE UNIQUE INDEX "api_tokens_hash_unique" ON "api_tokens" USING btree ("token_hash");--> statement-breakpoint
CREATE INDEX "api_tokens_user_idx" ON "api_tokens" USING btree ("user_id","id");--> statement-breakpoint
CREATE INDEX "api_tokens_project_idx" ON "api_tokens" USING btree ("project_id","id");--> statement-breakpoint
CREATE UNIQUE INDEX "collections_project_name_unique" ON "collections" USING btree ("project_id","name");--> statement-breakpoint
CREATE UNIQUE INDEX "environments_project_name_unique" ON "environments" USING btree ("project_id","name");--> statement-breakpoint
CREATE UNIQUE INDEX "invitations_token_hash_unique" ON "invitations" USING btree ("token_hash");--> statement-breakpoint
CREATE INDEX "invitations_user_idx" ON "invitations" USING btree ("user_id");--> statement-breakpoint
CREATE INDEX "note_messages_note_idx" ON "note_messages" USING btree ("note_id","id");--> statement-breakpoint
CREATE INDEX "notes_env_id_idx" ON "notes" USING btree ("environment_id","id");--> statement-breakpoint
CREATE INDEX "notes_env_created_idx" ON "notes" USING btree ("environment_id","created_at");--> statement-breakpoint
CREATE INDEX "notes_env_updated_idx" ON "notes" USING btree ("environment_id","updated_at");--> statement-breakpoint
CREATE INDEX "notes_env_archived_idx" ON "notes" USING btree ("environment_id","archived_at");--> statement-breakpoint
CREATE INDEX "notes_env_record_idx" ON "notes" USING btree ("environment_id","record_id","id");--> statement-breakpoint
CREATE INDEX "notes_env_user_idx" ON "notes" USING btree ("environment_id","user_id","id");--> statement-breakpoint
CREATE INDEX "notes_env_team_idx" ON "notes" USING btree ("environment_id","team_id","id");--> statement-breakpoint
CREATE INDEX "notes_env_collection_idx" ON "notes" USING btree ("environment_id","collection_id","id");--> statement-breakpoint
CREATE INDEX "project_members_user_idx" ON "project_members" USING btree ("user_id");--> statement-breakpoint
CREATE UNIQUE INDEX "projects_name_unique" ON "projects" USING btree ("name");--> statement-breakpoint
CREATE UNIQUE INDEX "records_env_collection_key_unique" ON "records" USING btree ("environment_id","collection_id","record_key");--> statement-breakpoint
CREATE UNIQUE INDEX "renderings_environment_team_unique" ON "renderings" USING btree ("environment_id","team_id");--> statement-breakpoint
CREATE UNIQUE INDEX "runs_one_active_per_record" ON "runs" USING btree ("workflow_id","record_id") WHERE status in ('queued', 'running', 'waiting');--> statement-breakpoint
CREATE INDEX "runs_claim_idx" ON "runs" USING btree ("available_at") WHERE status in ('queued', 'waiting');--> statement-breakpoint
CREATE INDEX "runs_lease_idx" ON "runs" USING btree ("lease_expires_at") WHERE status = 'running';--> statement-breakpoint
CREATE INDEX "runs_env_id_idx" ON "runs" USING btree ("environment_id","id");--> statement-breakpoint
CREATE INDEX "runs_env_record_idx" ON "runs" USING btree ("environment_id","record_id","id");--> statement-breakpoint
CREATE INDEX "sessions_user_idx" ON "sessions" USING btree ("user_id");--> statement-breakpoint
CREATE INDEX "team_members_user_idx" ON "team_members" USING btree ("user_id");--> statement-breakpoint
CREATE UNIQUE INDEX "teams_project_name_unique" ON "teams" USING btree ("project_id","name");--> statement-breakpoint
CREATE UNIQUE INDEX "users_email_unique" ON "users" USING btree ("email");--> statement-breakpoint
CREATE UNIQUE INDEX "workflow_versions_workflow_version_unique" ON "workflow_versions" USING btree ("workflow_id","version");--> statement-breakpoint
CREATE UNIQUE INDEX "workflows_rendering_name_unique" ON "workflows" USING btree ("rendering_id","name");