-- The logs' hash chain (docs/audit.md): each entry's position in its scope's chain and its hash. The append-only
-- triggers are lifted here so that the migrator can link the entries written before (src/db/chain-upgrade.ts, in
-- this migration's transaction, right after these statements); 0027 restores them as they were.
ALTER TABLE `activity_logs` ADD `chain_position` integer;--> statement-breakpoint
ALTER TABLE `activity_logs` ADD `chain_hash` text;--> statement-breakpoint
CREATE UNIQUE INDEX `activity_logs_env_chain_idx` ON `activity_logs` (`environment_id`,`chain_position`);--> statement-breakpoint
ALTER TABLE `admin_logs` ADD `chain_position` integer;--> statement-breakpoint
ALTER TABLE `admin_logs` ADD `chain_hash` text;--> statement-breakpoint
CREATE UNIQUE INDEX `admin_logs_scope_chain_idx` ON `admin_logs` (coalesce(project_id, 0),`chain_position`);--> statement-breakpoint
DROP TRIGGER `activity_logs_append_only`;--> statement-breakpoint
DROP TRIGGER `admin_logs_append_only`;
