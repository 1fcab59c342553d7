-- Logs are append-only in the database itself (as SQLite's migration 0001): an UPDATE of an entry is refused.
CREATE FUNCTION trellis_refuse_log_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% entries are append-only', TG_ARGV[0];
END;
$$;--> statement-breakpoint
CREATE TRIGGER activity_logs_append_only BEFORE UPDATE ON activity_logs
  FOR EACH ROW EXECUTE FUNCTION trellis_refuse_log_update('activity log');--> statement-breakpoint
CREATE TRIGGER activity_log_records_append_only BEFORE UPDATE ON activity_log_records
  FOR EACH ROW EXECUTE FUNCTION trellis_refuse_log_update('activity log');--> statement-breakpoint
CREATE TRIGGER admin_logs_append_only BEFORE UPDATE ON admin_logs
  FOR EACH ROW EXECUTE FUNCTION trellis_refuse_log_update('admin log');
