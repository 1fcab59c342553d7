-- The activity log's append-only trigger decides in its WHEN clause, evaluated without a function call: the one update
-- the lists' pass makes — an unchained entry gets its time (never earlier), position and hash, every other column as
-- it was — passes; any other update calls trellis_refuse_log_update and is refused. The pass updates every entry once,
-- so this is per entry: compared column by column, where the function compared the two rows as JSON (measured: 12 µs
-- of the database's time per entry, a third of the pass's). The columns are every column of activity_logs but those
-- three (test/schema-parity.test.ts holds the list to the table's columns).
DROP TRIGGER activity_logs_append_only ON activity_logs;--> statement-breakpoint
CREATE TRIGGER activity_logs_append_only BEFORE UPDATE ON activity_logs
  FOR EACH ROW WHEN (NOT (OLD.chain_position IS NULL AND NEW.chain_position IS NOT NULL AND NEW.created_at >= OLD.created_at
    AND (NEW.id, NEW.environment_id, NEW.type, NEW.action, NEW.label, NEW.user_id, NEW.team_id, NEW.collection_id, NEW.token_id,
      NEW.workflow_name, NEW.run_id, NEW.step_name, NEW.extension)
    IS NOT DISTINCT FROM (OLD.id, OLD.environment_id, OLD.type, OLD.action, OLD.label, OLD.user_id, OLD.team_id, OLD.collection_id,
      OLD.token_id, OLD.workflow_name, OLD.run_id, OLD.step_name, OLD.extension)))
  EXECUTE FUNCTION trellis_refuse_log_update('activity log');--> statement-breakpoint
DROP FUNCTION trellis_refuse_log_update_but_chaining();
