-- The logs' hash chain (docs/audit.md), as SQLite's 0026: the append-only triggers are lifted for the migrator to
-- link the entries written before (src/db/chain-upgrade.ts, in this migration's transaction); 0023 restores them.
ALTER TABLE "activity_logs" ADD COLUMN "chain_position" bigint;--> statement-breakpoint
ALTER TABLE "activity_logs" ADD COLUMN "chain_hash" text;--> statement-breakpoint
ALTER TABLE "admin_logs" ADD COLUMN "chain_position" bigint;--> statement-breakpoint
ALTER TABLE "admin_logs" ADD COLUMN "chain_hash" text;--> statement-breakpoint
CREATE UNIQUE INDEX "activity_logs_env_chain_idx" ON "activity_logs" USING btree ("environment_id","chain_position");--> statement-breakpoint
CREATE UNIQUE INDEX "admin_logs_scope_chain_idx" ON "admin_logs" USING btree (coalesce(project_id, 0),"chain_position");--> statement-breakpoint
DROP TRIGGER activity_logs_append_only ON activity_logs;--> statement-breakpoint
DROP TRIGGER admin_logs_append_only ON admin_logs;
