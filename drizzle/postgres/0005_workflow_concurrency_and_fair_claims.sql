ALTER TABLE "workflows" ADD COLUMN "concurrency_limit" bigint;--> statement-breakpoint
CREATE INDEX "runs_claim_env_idx" ON "runs" USING btree ("environment_id","available_at") WHERE status in ('queued', 'waiting');--> statement-breakpoint
CREATE INDEX "runs_claim_workflow_idx" ON "runs" USING btree ("workflow_id","available_at") WHERE status in ('queued', 'waiting');