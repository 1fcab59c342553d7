CREATE TABLE `audit_checkpoints` (
	`id` text PRIMARY KEY NOT NULL,
	`kind` text NOT NULL,
	`log` text NOT NULL,
	`scope_id` integer,
	`scope_key` text NOT NULL,
	`position` integer NOT NULL,
	`hash` text NOT NULL,
	`kid` text NOT NULL,
	`signature` text NOT NULL,
	`created_at` integer NOT NULL,
	CONSTRAINT "audit_checkpoints_kind_check" CHECK("audit_checkpoints"."kind" in ('checkpoint', 'anchor')),
	CONSTRAINT "audit_checkpoints_log_check" CHECK("audit_checkpoints"."log" in ('activity', 'admin'))
);
--> statement-breakpoint
CREATE UNIQUE INDEX `audit_checkpoints_scope_position_idx` ON `audit_checkpoints` (`scope_key`,`position`,`kind`);--> statement-breakpoint
CREATE TABLE `audit_witness_deliveries` (
	`id` text PRIMARY KEY NOT NULL,
	`checkpoint_id` text NOT NULL,
	`witness` text NOT NULL,
	`status` text NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_attempt_at` integer NOT NULL,
	`lease_owner` text,
	`lease_expires_at` integer,
	`last_error` text,
	`created_at` integer NOT NULL,
	`finished_at` integer,
	FOREIGN KEY (`checkpoint_id`) REFERENCES `audit_checkpoints`(`id`) ON UPDATE no action ON DELETE cascade,
	CONSTRAINT "audit_witness_deliveries_status_check" CHECK("audit_witness_deliveries"."status" in ('pending', 'delivered', 'failed')),
	CONSTRAINT "audit_witness_deliveries_witness_check" CHECK("audit_witness_deliveries"."witness" in ('dir', 'url'))
);
--> statement-breakpoint
CREATE INDEX `audit_witness_deliveries_due_idx` ON `audit_witness_deliveries` (`next_attempt_at`) WHERE status = 'pending';--> statement-breakpoint
CREATE INDEX `audit_witness_deliveries_finished_idx` ON `audit_witness_deliveries` (`finished_at`);