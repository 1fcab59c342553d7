ALTER TABLE `records` ADD `deleted_at` integer;--> statement-breakpoint
CREATE INDEX `records_deleted_idx` ON `records` (`deleted_at`) WHERE deleted_at IS NOT NULL;