-- The append-only triggers 0022 lifted to link the existing entries, restored as they were.
CREATE TRIGGER activity_logs_append_only BEFORE UPDATE ON activity_logs
  FOR EACH ROW EXECUTE FUNCTION trellis_refuse_log_update('activity log');--> statement-breakpoint
CREATE TRIGGER admin_logs_append_only BEFORE UPDATE ON admin_logs
  FOR EACH ROW EXECUTE FUNCTION trellis_refuse_log_update('admin log');
