-- Activity and admin logs are append-only (DESIGN §7): the database itself refuses to change an entry.
-- Deletion stays possible for the retention job (TRELLIS_LOG_RETENTION_DAYS) and for cascades.
CREATE TRIGGER `activity_logs_append_only` BEFORE UPDATE ON `activity_logs`
BEGIN
  SELECT RAISE(ABORT, 'activity log entries are append-only');
END;
--> statement-breakpoint
CREATE TRIGGER `activity_log_records_append_only` BEFORE UPDATE ON `activity_log_records`
BEGIN
  SELECT RAISE(ABORT, 'activity log entries are append-only');
END;
--> statement-breakpoint
CREATE TRIGGER `admin_logs_append_only` BEFORE UPDATE ON `admin_logs`
BEGIN
  SELECT RAISE(ABORT, 'admin log entries are append-only');
END;
