-- The append-only triggers 0026 lifted to link the existing entries, restored as they were.
CREATE TRIGGER `activity_logs_append_only` BEFORE UPDATE ON `activity_logs`
BEGIN
  SELECT RAISE(ABORT, 'activity log entries are append-only');
END;--> statement-breakpoint
CREATE TRIGGER `admin_logs_append_only` BEFORE UPDATE ON `admin_logs`
BEGIN
  SELECT RAISE(ABORT, 'admin log entries are append-only');
END;
