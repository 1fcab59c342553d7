DROP INDEX `runs_env_id_idx`;--> statement-breakpoint
DROP INDEX `runs_env_record_idx`;--> statement-breakpoint
CREATE INDEX `runs_env_created_idx` ON `runs` (`environment_id`,`created_at`,`id`);--> statement-breakpoint
CREATE INDEX `runs_env_record_created_idx` ON `runs` (`environment_id`,`record_id`,`created_at`,`id`);