CREATE TABLE `idempotency_keys` (
	`workflow_id` integer NOT NULL,
	`user_id` integer NOT NULL,
	`key` text NOT NULL,
	`request_hash` text NOT NULL,
	`run_id` text NOT NULL,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`workflow_id`, `user_id`, `key`),
	FOREIGN KEY (`workflow_id`) REFERENCES `workflows`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`run_id`) REFERENCES `runs`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `idempotency_keys_created_idx` ON `idempotency_keys` (`created_at`);--> statement-breakpoint
CREATE INDEX `idempotency_keys_run_idx` ON `idempotency_keys` (`run_id`);--> statement-breakpoint
ALTER TABLE `runs` ADD `retry_of` text;--> statement-breakpoint
CREATE UNIQUE INDEX `runs_retry_of_idx` ON `runs` (`retry_of`) WHERE retry_of is not null;--> statement-breakpoint
CREATE INDEX `runs_finished_idx` ON `runs` (`finished_at`) WHERE status in ('succeeded', 'failed', 'cancelled');