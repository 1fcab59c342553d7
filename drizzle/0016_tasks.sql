CREATE TABLE `task_assignees` (
	`task_id` text NOT NULL,
	`team_id` integer,
	`user_id` integer,
	`escalated` integer DEFAULT false NOT NULL,
	FOREIGN KEY (`task_id`) REFERENCES `tasks`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`team_id`) REFERENCES `teams`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade,
	CONSTRAINT "task_assignees_one_subject_check" CHECK((team_id is null) <> (user_id is null))
);
--> statement-breakpoint
CREATE UNIQUE INDEX `task_assignees_team_unique` ON `task_assignees` (`task_id`,`team_id`) WHERE team_id is not null;--> statement-breakpoint
CREATE UNIQUE INDEX `task_assignees_user_unique` ON `task_assignees` (`task_id`,`user_id`) WHERE user_id is not null;--> statement-breakpoint
CREATE INDEX `task_assignees_team_idx` ON `task_assignees` (`team_id`,`task_id`) WHERE team_id is not null;--> statement-breakpoint
CREATE INDEX `task_assignees_user_idx` ON `task_assignees` (`user_id`,`task_id`) WHERE user_id is not null;--> statement-breakpoint
CREATE TABLE `task_decisions` (
	`task_id` text NOT NULL,
	`user_id` integer NOT NULL,
	`decision` text NOT NULL,
	`comment` text,
	`input` text,
	`idempotency_key` text,
	`request_hash` text,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`task_id`, `user_id`),
	FOREIGN KEY (`task_id`) REFERENCES `tasks`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE no action,
	CONSTRAINT "task_decisions_decision_check" CHECK("task_decisions"."decision" in ('approve', 'reject'))
);
--> statement-breakpoint
CREATE TABLE `tasks` (
	`id` text PRIMARY KEY NOT NULL,
	`run_id` text NOT NULL,
	`step_index` integer NOT NULL,
	`step_name` text NOT NULL,
	`environment_id` integer NOT NULL,
	`workflow_id` integer NOT NULL,
	`team_id` integer NOT NULL,
	`collection_id` integer,
	`record_id` text NOT NULL,
	`requester_id` integer NOT NULL,
	`title` text NOT NULL,
	`approvals_required` integer NOT NULL,
	`allow_requester` integer DEFAULT false NOT NULL,
	`form` text,
	`status` text NOT NULL,
	`due_at` integer,
	`on_timeout` text DEFAULT 'fail' NOT NULL,
	`escalate_to` text,
	`escalated` integer DEFAULT false NOT NULL,
	`created_at` integer NOT NULL,
	`closed_at` integer,
	FOREIGN KEY (`run_id`) REFERENCES `runs`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`workflow_id`) REFERENCES `workflows`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`team_id`) REFERENCES `teams`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`collection_id`) REFERENCES `collections`(`id`) ON UPDATE no action ON DELETE set null,
	FOREIGN KEY (`requester_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE no action,
	CONSTRAINT "tasks_status_check" CHECK((status = 'open' OR status = 'approved' OR status = 'rejected' OR status = 'expired' OR status = 'cancelled'))
);
--> statement-breakpoint
CREATE UNIQUE INDEX `tasks_run_step_unique` ON `tasks` (`run_id`,`step_index`);--> statement-breakpoint
CREATE INDEX `tasks_env_id_idx` ON `tasks` (`environment_id`,`id`);--> statement-breakpoint
CREATE INDEX `tasks_env_created_idx` ON `tasks` (`environment_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `tasks_due_idx` ON `tasks` (`due_at`) WHERE status = 'open' and due_at is not null;