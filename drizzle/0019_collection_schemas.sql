ALTER TABLE `collections` ADD `schema` text;--> statement-breakpoint
ALTER TABLE `collections` ADD `schema_version` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `collections` ADD `schema_updated_at` integer;