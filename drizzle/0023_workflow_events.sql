CREATE TABLE `workflow_event_triggers` (
	`workflow_id` integer PRIMARY KEY NOT NULL,
	`environment_id` integer NOT NULL,
	`collection_id` integer NOT NULL,
	`events` text NOT NULL,
	`filter` text,
	`run_as_user_id` integer NOT NULL,
	`debounce_seconds` integer,
	`received` integer DEFAULT 0 NOT NULL,
	`started` integer DEFAULT 0 NOT NULL,
	`skipped` integer DEFAULT 0 NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`workflow_id`) REFERENCES `workflows`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`collection_id`) REFERENCES `collections`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`run_as_user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `workflow_event_triggers_place_idx` ON `workflow_event_triggers` (`environment_id`,`collection_id`);--> statement-breakpoint
CREATE TABLE `workflow_events` (
	`id` text PRIMARY KEY NOT NULL,
	`workflow_id` integer NOT NULL,
	`record_key` text NOT NULL,
	`event` text NOT NULL,
	`changed_fields` text,
	`note_id` integer,
	`chain` text NOT NULL,
	`status` text NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_attempt_at` integer NOT NULL,
	`lease_owner` text,
	`lease_expires_at` integer,
	`created_at` integer NOT NULL,
	`finished_at` integer,
	FOREIGN KEY (`workflow_id`) REFERENCES `workflows`(`id`) ON UPDATE no action ON DELETE cascade,
	CONSTRAINT "workflow_events_status_check" CHECK("workflow_events"."status" in ('pending', 'failed'))
);
--> statement-breakpoint
CREATE INDEX `workflow_events_due_idx` ON `workflow_events` (`next_attempt_at`) WHERE status = 'pending';--> statement-breakpoint
CREATE INDEX `workflow_events_record_idx` ON `workflow_events` (`workflow_id`,`record_key`);--> statement-breakpoint
PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_runs` (
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
	`retry_of` text,
	`cause` text,
	FOREIGN KEY (`workflow_id`) REFERENCES `workflows`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`workflow_version_id`) REFERENCES `workflow_versions`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`token_id`) REFERENCES `api_tokens`(`id`) ON UPDATE no action ON DELETE set null,
	CONSTRAINT "runs_status_check" CHECK((status = 'queued' OR status = 'running' OR status = 'waiting' OR status = 'succeeded' OR status = 'failed' OR status = 'cancelled')),
	CONSTRAINT "runs_trigger_check" CHECK("__new_runs"."trigger" in ('manual', 'webhook', 'schedule', 'event'))
);
--> statement-breakpoint
INSERT INTO `__new_runs`("id", "workflow_id", "workflow_version_id", "environment_id", "record_id", "user_id", "token_id", "trigger", "status", "next_step", "available_at", "lease_owner", "lease_expires_at", "attempts", "error", "created_at", "started_at", "finished_at", "retry_of", "cause") SELECT "id", "workflow_id", "workflow_version_id", "environment_id", "record_id", "user_id", "token_id", "trigger", "status", "next_step", "available_at", "lease_owner", "lease_expires_at", "attempts", "error", "created_at", "started_at", "finished_at", "retry_of", NULL FROM `runs`;--> statement-breakpoint
DROP TABLE `runs`;--> statement-breakpoint
ALTER TABLE `__new_runs` RENAME TO `runs`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE UNIQUE INDEX `runs_one_active_per_record` ON `runs` (`workflow_id`,`record_id`) WHERE (status = 'queued' OR status = 'running' OR status = 'waiting');--> statement-breakpoint
CREATE INDEX `runs_claim_idx` ON `runs` (`available_at`) WHERE status in ('queued', 'waiting');--> statement-breakpoint
CREATE INDEX `runs_lease_idx` ON `runs` (`lease_expires_at`) WHERE status = 'running';--> statement-breakpoint
CREATE INDEX `runs_claim_env_idx` ON `runs` (`environment_id`,`available_at`) WHERE status in ('queued', 'waiting');--> statement-breakpoint
CREATE INDEX `runs_claim_workflow_idx` ON `runs` (`workflow_id`,`available_at`) WHERE status in ('queued', 'waiting');--> statement-breakpoint
CREATE INDEX `runs_env_id_idx` ON `runs` (`environment_id`,`id`);--> statement-breakpoint
CREATE INDEX `runs_env_record_idx` ON `runs` (`environment_id`,`record_id`,`id`);--> statement-breakpoint
CREATE UNIQUE INDEX `runs_retry_of_idx` ON `runs` (`retry_of`) WHERE retry_of is not null;--> statement-breakpoint
CREATE INDEX `runs_finished_idx` ON `runs` (`finished_at`) WHERE (status = 'succeeded' OR status = 'failed' OR status = 'cancelled');