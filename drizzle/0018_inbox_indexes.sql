CREATE INDEX `tasks_open_env_idx` ON `tasks` (`environment_id`,`id`) WHERE status = 'open';--> statement-breakpoint
CREATE INDEX `tasks_env_record_idx` ON `tasks` (`environment_id`,`record_id`,`id`);