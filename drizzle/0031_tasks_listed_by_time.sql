DROP INDEX `tasks_env_id_idx`;--> statement-breakpoint
DROP INDEX `tasks_env_created_idx`;--> statement-breakpoint
DROP INDEX `tasks_open_env_idx`;--> statement-breakpoint
DROP INDEX `tasks_env_record_idx`;--> statement-breakpoint
CREATE INDEX `tasks_env_created_idx` ON `tasks` (`environment_id`,`created_at`,`id`);--> statement-breakpoint
CREATE INDEX `tasks_open_env_idx` ON `tasks` (`environment_id`,`created_at`,`id`) WHERE status = 'open';--> statement-breakpoint
CREATE INDEX `tasks_env_record_idx` ON `tasks` (`environment_id`,`record_id`,`created_at`,`id`);--> statement-breakpoint
PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_task_assignees` (
	`task_id` text NOT NULL,
	`team_id` integer,
	`user_id` integer,
	`escalated` integer DEFAULT false NOT NULL,
	`task_created_at` integer NOT NULL,
	FOREIGN KEY (`task_id`) REFERENCES `tasks`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`team_id`) REFERENCES `teams`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade,
	CONSTRAINT "task_assignees_one_subject_check" CHECK((team_id is null) <> (user_id is null))
);
--> statement-breakpoint
-- Each assignee takes its task's created_at (a person's tasks are walked from their assignments in the lists' order).
INSERT INTO `__new_task_assignees`("task_id", "team_id", "user_id", "escalated", "task_created_at")
  SELECT a."task_id", a."team_id", a."user_id", a."escalated", k."created_at" FROM `task_assignees` a JOIN `tasks` k ON k."id" = a."task_id";--> statement-breakpoint
DROP TABLE `task_assignees`;--> statement-breakpoint
ALTER TABLE `__new_task_assignees` RENAME TO `task_assignees`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE UNIQUE INDEX `task_assignees_team_unique` ON `task_assignees` (`task_id`,`team_id`) WHERE team_id is not null;--> statement-breakpoint
CREATE UNIQUE INDEX `task_assignees_user_unique` ON `task_assignees` (`task_id`,`user_id`) WHERE user_id is not null;--> statement-breakpoint
CREATE INDEX `task_assignees_task_idx` ON `task_assignees` (`task_id`);--> statement-breakpoint
CREATE INDEX `task_assignees_team_idx` ON `task_assignees` (`team_id`,`task_created_at`,`task_id`) WHERE team_id is not null;--> statement-breakpoint
CREATE INDEX `task_assignees_user_idx` ON `task_assignees` (`user_id`,`task_created_at`,`task_id`) WHERE user_id is not null;
