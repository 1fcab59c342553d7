ALTER TABLE `workflows` ADD `concurrency_limit` integer;--> statement-breakpoint
CREATE INDEX `runs_claim_env_idx` ON `runs` (`environment_id`,`available_at`) WHERE status in ('queued', 'waiting');--> statement-breakpoint
CREATE INDEX `runs_claim_workflow_idx` ON `runs` (`workflow_id`,`available_at`) WHERE status in ('queued', 'waiting');