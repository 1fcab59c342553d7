DROP INDEX `tasks_due_idx`;--> statement-breakpoint
ALTER TABLE `tasks` ADD `remind_at` integer;--> statement-breakpoint
ALTER TABLE `tasks` ADD `reminded_at` integer;--> statement-breakpoint
CREATE INDEX `tasks_remind_idx` ON `tasks` (`remind_at`) WHERE status = 'open' and remind_at is not null;--> statement-breakpoint
CREATE INDEX `tasks_due_idx` ON `tasks` (`due_at`) WHERE status = 'open' and due_at is not null and not escalated;