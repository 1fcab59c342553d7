CREATE TABLE `activity_log_records` (
	`log_id` integer NOT NULL,
	`environment_id` integer NOT NULL,
	`record_id` text NOT NULL,
	PRIMARY KEY(`log_id`, `record_id`),
	FOREIGN KEY (`log_id`) REFERENCES `activity_logs`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `activity_log_records_env_record_idx` ON `activity_log_records` (`environment_id`,`record_id`,`log_id`);--> statement-breakpoint
CREATE TABLE `activity_logs` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`environment_id` integer NOT NULL,
	`type` text NOT NULL,
	`action` text NOT NULL,
	`label` text,
	`user_id` integer NOT NULL,
	`team_id` integer,
	`collection_id` integer,
	`token_id` integer,
	`workflow_name` text,
	`run_id` text,
	`step_name` text,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`team_id`) REFERENCES `teams`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`collection_id`) REFERENCES `collections`(`id`) ON UPDATE no action ON DELETE set null,
	FOREIGN KEY (`token_id`) REFERENCES `api_tokens`(`id`) ON UPDATE no action ON DELETE set null,
	CONSTRAINT "activity_logs_type_check" CHECK("activity_logs"."type" in ('read', 'write'))
);
--> statement-breakpoint
CREATE INDEX `activity_logs_env_id_idx` ON `activity_logs` (`environment_id`,`id`);--> statement-breakpoint
CREATE INDEX `activity_logs_env_created_idx` ON `activity_logs` (`environment_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `activity_logs_env_user_idx` ON `activity_logs` (`environment_id`,`user_id`,`id`);--> statement-breakpoint
CREATE INDEX `activity_logs_env_team_idx` ON `activity_logs` (`environment_id`,`team_id`,`id`);--> statement-breakpoint
CREATE INDEX `activity_logs_env_collection_idx` ON `activity_logs` (`environment_id`,`collection_id`,`id`);--> statement-breakpoint
CREATE INDEX `activity_logs_env_action_idx` ON `activity_logs` (`environment_id`,`action`,`id`);--> statement-breakpoint
CREATE INDEX `activity_logs_env_type_idx` ON `activity_logs` (`environment_id`,`type`,`id`);--> statement-breakpoint
CREATE TABLE `admin_logs` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`project_id` integer,
	`type` text NOT NULL,
	`resource` text NOT NULL,
	`initiator` text NOT NULL,
	`user_id` integer,
	`subject_user_id` integer,
	`previous_value` text,
	`new_value` text,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`subject_user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE no action,
	CONSTRAINT "admin_logs_type_check" CHECK("admin_logs"."type" in ('add', 'remove', 'update', 'initial')),
	CONSTRAINT "admin_logs_initiator_check" CHECK("admin_logs"."initiator" in ('administrator', 'identityProvider', 'system'))
);
--> statement-breakpoint
CREATE INDEX `admin_logs_project_id_idx` ON `admin_logs` (`project_id`,`id`);--> statement-breakpoint
CREATE INDEX `admin_logs_project_created_idx` ON `admin_logs` (`project_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `admin_logs_project_user_idx` ON `admin_logs` (`project_id`,`user_id`,`id`);--> statement-breakpoint
CREATE INDEX `admin_logs_project_type_idx` ON `admin_logs` (`project_id`,`type`,`id`);--> statement-breakpoint
CREATE INDEX `admin_logs_project_resource_idx` ON `admin_logs` (`project_id`,`resource`,`id`);--> statement-breakpoint
CREATE INDEX `admin_logs_project_initiator_idx` ON `admin_logs` (`project_id`,`initiator`,`id`);--> statement-breakpoint
CREATE TABLE `api_tokens` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`name` text NOT NULL,
	`user_id` integer NOT NULL,
	`project_id` integer NOT NULL,
	`token_hash` text NOT NULL,
	`prefix` text NOT NULL,
	`scopes` text NOT NULL,
	`created_with_sso` integer DEFAULT false NOT NULL,
	`created_at` integer NOT NULL,
	`last_used_at` integer,
	`expires_at` integer,
	`revoked_at` integer,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `api_tokens_hash_unique` ON `api_tokens` (`token_hash`);--> statement-breakpoint
CREATE INDEX `api_tokens_user_idx` ON `api_tokens` (`user_id`,`id`);--> statement-breakpoint
CREATE INDEX `api_tokens_project_idx` ON `api_tokens` (`project_id`,`id`);--> statement-breakpoint
CREATE TABLE `collection_permissions` (
	`collection_id` integer NOT NULL,
	`team_id` integer NOT NULL,
	`can_read` integer DEFAULT true NOT NULL,
	`can_edit` integer DEFAULT true NOT NULL,
	PRIMARY KEY(`collection_id`, `team_id`),
	FOREIGN KEY (`collection_id`) REFERENCES `collections`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`team_id`) REFERENCES `teams`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `collections` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`project_id` integer NOT NULL,
	`name` text NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `collections_project_name_unique` ON `collections` (`project_id`,`name`);--> statement-breakpoint
CREATE TABLE `environments` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`project_id` integer NOT NULL,
	`name` text NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `environments_project_name_unique` ON `environments` (`project_id`,`name`);--> statement-breakpoint
CREATE TABLE `note_messages` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`note_id` integer NOT NULL,
	`user_id` integer NOT NULL,
	`content` text NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`note_id`) REFERENCES `notes`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `note_messages_note_idx` ON `note_messages` (`note_id`,`id`);--> statement-breakpoint
CREATE TABLE `notes` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`environment_id` integer NOT NULL,
	`team_id` integer NOT NULL,
	`collection_id` integer,
	`record_id` text NOT NULL,
	`title` text NOT NULL,
	`user_id` integer NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`archived_at` integer,
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`team_id`) REFERENCES `teams`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`collection_id`) REFERENCES `collections`(`id`) ON UPDATE no action ON DELETE set null,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `notes_env_id_idx` ON `notes` (`environment_id`,`id`);--> statement-breakpoint
CREATE INDEX `notes_env_created_idx` ON `notes` (`environment_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `notes_env_updated_idx` ON `notes` (`environment_id`,`updated_at`);--> statement-breakpoint
CREATE INDEX `notes_env_archived_idx` ON `notes` (`environment_id`,`archived_at`);--> statement-breakpoint
CREATE INDEX `notes_env_record_idx` ON `notes` (`environment_id`,`record_id`,`id`);--> statement-breakpoint
CREATE INDEX `notes_env_user_idx` ON `notes` (`environment_id`,`user_id`,`id`);--> statement-breakpoint
CREATE INDEX `notes_env_team_idx` ON `notes` (`environment_id`,`team_id`,`id`);--> statement-breakpoint
CREATE INDEX `notes_env_collection_idx` ON `notes` (`environment_id`,`collection_id`,`id`);--> statement-breakpoint
CREATE TABLE `project_members` (
	`project_id` integer NOT NULL,
	`user_id` integer NOT NULL,
	`role` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`project_id`, `user_id`),
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade,
	CONSTRAINT "project_members_role_check" CHECK("project_members"."role" in ('admin', 'developer', 'editor', 'user', 'manager'))
);
--> statement-breakpoint
CREATE INDEX `project_members_user_idx` ON `project_members` (`user_id`);--> statement-breakpoint
CREATE TABLE `projects` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`name` text NOT NULL,
	`sso` integer DEFAULT false NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `projects_name_unique` ON `projects` (`name`);--> statement-breakpoint
CREATE TABLE `records` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`environment_id` integer NOT NULL,
	`collection_id` integer NOT NULL,
	`record_key` text NOT NULL,
	`data` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`collection_id`) REFERENCES `collections`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `records_env_collection_key_unique` ON `records` (`environment_id`,`collection_id`,`record_key`);--> statement-breakpoint
CREATE TABLE `renderings` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`environment_id` integer NOT NULL,
	`team_id` integer NOT NULL,
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`team_id`) REFERENCES `teams`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `renderings_environment_team_unique` ON `renderings` (`environment_id`,`team_id`);--> statement-breakpoint
CREATE TABLE `run_steps` (
	`run_id` text NOT NULL,
	`step_index` integer NOT NULL,
	`name` text NOT NULL,
	`type` text NOT NULL,
	`status` text NOT NULL,
	`attempts` integer DEFAULT 1 NOT NULL,
	`output` text,
	`error` text,
	`started_at` integer NOT NULL,
	`finished_at` integer NOT NULL,
	PRIMARY KEY(`run_id`, `step_index`),
	FOREIGN KEY (`run_id`) REFERENCES `runs`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `runs` (
	`id` text PRIMARY KEY NOT NULL,
	`workflow_id` integer NOT NULL,
	`workflow_version_id` integer NOT NULL,
	`environment_id` integer NOT NULL,
	`record_id` text NOT NULL,
	`user_id` integer NOT NULL,
	`token_id` integer,
	`trigger` text NOT NULL,
	`status` text NOT NULL,
	`next_step` integer DEFAULT 0 NOT NULL,
	`available_at` integer NOT NULL,
	`lease_owner` text,
	`lease_expires_at` integer,
	`attempts` integer DEFAULT 0 NOT NULL,
	`error` text,
	`created_at` integer NOT NULL,
	`started_at` integer,
	`finished_at` integer,
	FOREIGN KEY (`workflow_id`) REFERENCES `workflows`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`workflow_version_id`) REFERENCES `workflow_versions`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`token_id`) REFERENCES `api_tokens`(`id`) ON UPDATE no action ON DELETE set null,
	CONSTRAINT "runs_status_check" CHECK("runs"."status" in ('queued', 'running', 'waiting', 'succeeded', 'failed', 'cancelled')),
	CONSTRAINT "runs_trigger_check" CHECK("runs"."trigger" in ('manual', 'webhook'))
);
--> statement-breakpoint
CREATE UNIQUE INDEX `runs_one_active_per_record` ON `runs` (`workflow_id`,`record_id`) WHERE status in ('queued', 'running', 'waiting');--> statement-breakpoint
CREATE INDEX `runs_claim_idx` ON `runs` (`available_at`) WHERE status in ('queued', 'waiting');--> statement-breakpoint
CREATE INDEX `runs_lease_idx` ON `runs` (`lease_expires_at`) WHERE status = 'running';--> statement-breakpoint
CREATE INDEX `runs_env_id_idx` ON `runs` (`environment_id`,`id`);--> statement-breakpoint
CREATE INDEX `runs_env_created_idx` ON `runs` (`environment_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `runs_env_workflow_idx` ON `runs` (`environment_id`,`workflow_id`,`id`);--> statement-breakpoint
CREATE INDEX `runs_env_record_idx` ON `runs` (`environment_id`,`record_id`,`id`);--> statement-breakpoint
CREATE INDEX `runs_env_status_idx` ON `runs` (`environment_id`,`status`,`id`);--> statement-breakpoint
CREATE TABLE `sessions` (
	`id_hash` text PRIMARY KEY NOT NULL,
	`user_id` integer NOT NULL,
	`via_sso` integer DEFAULT false NOT NULL,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `sessions_user_idx` ON `sessions` (`user_id`);--> statement-breakpoint
CREATE TABLE `team_members` (
	`team_id` integer NOT NULL,
	`user_id` integer NOT NULL,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`team_id`, `user_id`),
	FOREIGN KEY (`team_id`) REFERENCES `teams`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `team_members_user_idx` ON `team_members` (`user_id`);--> statement-breakpoint
CREATE TABLE `teams` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`project_id` integer NOT NULL,
	`name` text NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `teams_project_name_unique` ON `teams` (`project_id`,`name`);--> statement-breakpoint
CREATE TABLE `users` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`email` text NOT NULL,
	`username` text NOT NULL,
	`password_hash` text,
	`is_instance_admin` integer DEFAULT false NOT NULL,
	`disabled_at` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `users_email_unique` ON `users` (`email`);--> statement-breakpoint
CREATE TABLE `webhook_triggers` (
	`workflow_id` integer PRIMARY KEY NOT NULL,
	`enabled` integer DEFAULT false NOT NULL,
	`generation` integer DEFAULT 1 NOT NULL,
	`rate_per_minute` integer,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`workflow_id`) REFERENCES `workflows`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `workflow_versions` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`workflow_id` integer NOT NULL,
	`version` integer NOT NULL,
	`definition` text NOT NULL,
	`definition_hash` text NOT NULL,
	`published_by` integer,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`workflow_id`) REFERENCES `workflows`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`published_by`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `workflow_versions_workflow_version_unique` ON `workflow_versions` (`workflow_id`,`version`);--> statement-breakpoint
CREATE TABLE `workflows` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`rendering_id` integer NOT NULL,
	`name` text NOT NULL,
	`collection_id` integer NOT NULL,
	`active_version_id` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`rendering_id`) REFERENCES `renderings`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`collection_id`) REFERENCES `collections`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `workflows_rendering_name_unique` ON `workflows` (`rendering_id`,`name`);