CREATE TABLE `callback_attempts` (
	`delivery_id` text NOT NULL,
	`attempt` integer NOT NULL,
	`started_at` integer NOT NULL,
	`duration_ms` integer NOT NULL,
	`status_code` integer,
	`error` text,
	PRIMARY KEY(`delivery_id`, `attempt`),
	FOREIGN KEY (`delivery_id`) REFERENCES `callback_deliveries`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `callback_deliveries` (
	`id` text PRIMARY KEY NOT NULL,
	`endpoint_id` text NOT NULL,
	`run_id` text NOT NULL,
	`type` text NOT NULL,
	`payload` text NOT NULL,
	`status` text NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_attempt_at` integer NOT NULL,
	`lease_owner` text,
	`lease_expires_at` integer,
	`created_at` integer NOT NULL,
	`finished_at` integer,
	FOREIGN KEY (`endpoint_id`) REFERENCES `callback_endpoints`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`run_id`) REFERENCES `runs`(`id`) ON UPDATE no action ON DELETE cascade,
	CONSTRAINT "callback_deliveries_status_check" CHECK("callback_deliveries"."status" in ('pending', 'succeeded', 'failed'))
);
--> statement-breakpoint
CREATE INDEX `callback_deliveries_due_idx` ON `callback_deliveries` (`next_attempt_at`) WHERE status = 'pending';--> statement-breakpoint
CREATE INDEX `callback_deliveries_run_idx` ON `callback_deliveries` (`run_id`);--> statement-breakpoint
CREATE TABLE `callback_endpoints` (
	`id` text PRIMARY KEY NOT NULL,
	`workflow_id` integer NOT NULL,
	`url` text NOT NULL,
	`events` text NOT NULL,
	`secret_salt` text NOT NULL,
	`created_by` integer,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`workflow_id`) REFERENCES `workflows`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`created_by`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `callback_endpoints_workflow_idx` ON `callback_endpoints` (`workflow_id`);--> statement-breakpoint
CREATE TABLE `run_events` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`run_id` text NOT NULL,
	`environment_id` integer NOT NULL,
	`workflow_id` integer NOT NULL,
	`record_id` text NOT NULL,
	`sequence` integer NOT NULL,
	`type` text NOT NULL,
	`status` text NOT NULL,
	`step_index` integer,
	`step_name` text,
	`data` text,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`run_id`) REFERENCES `runs`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `run_events_run_sequence_idx` ON `run_events` (`run_id`,`sequence`);--> statement-breakpoint
CREATE INDEX `run_events_env_id_idx` ON `run_events` (`environment_id`,`id`);