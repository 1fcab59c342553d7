ALTER TABLE `api_tokens` ADD `parent_token_id` integer REFERENCES api_tokens(id);--> statement-breakpoint
CREATE INDEX `api_tokens_parent_idx` ON `api_tokens` (`parent_token_id`);