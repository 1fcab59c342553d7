-- Notes, note messages and log entries keep their times in epoch microseconds (README "Times"): a list can then
-- give each entry its own increasing createdAt, a thousand per millisecond, without running ahead of the clock.
-- Existing times (milliseconds) become the same instants in microseconds. The append-only triggers are lifted for
-- the two log UPDATEs and restored as they were (as in 0003).
UPDATE `notes` SET `created_at` = `created_at` * 1000, `updated_at` = `updated_at` * 1000, `archived_at` = `archived_at` * 1000;--> statement-breakpoint
UPDATE `note_messages` SET `created_at` = `created_at` * 1000;--> statement-breakpoint
DROP TRIGGER `activity_logs_append_only`;--> statement-breakpoint
UPDATE `activity_logs` SET `created_at` = `created_at` * 1000;--> statement-breakpoint
CREATE TRIGGER `activity_logs_append_only` BEFORE UPDATE ON `activity_logs`
BEGIN
  SELECT RAISE(ABORT, 'activity log entries are append-only');
END;--> statement-breakpoint
DROP TRIGGER `admin_logs_append_only`;--> statement-breakpoint
UPDATE `admin_logs` SET `created_at` = `created_at` * 1000;--> statement-breakpoint
CREATE TRIGGER `admin_logs_append_only` BEFORE UPDATE ON `admin_logs`
BEGIN
  SELECT RAISE(ABORT, 'admin log entries are append-only');
END;
