ALTER TABLE "records" ADD COLUMN "deleted_at" bigint;--> statement-breakpoint
CREATE INDEX "records_deleted_idx" ON "records" USING btree ("deleted_at") WHERE deleted_at IS NOT NULL;