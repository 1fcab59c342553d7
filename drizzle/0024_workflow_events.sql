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
ALTER TABLE `runs` ADD `cause` text;