ALTER TABLE "collections" ADD COLUMN "schema" text;--> statement-breakpoint
ALTER TABLE "collections" ADD COLUMN "schema_version" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "collections" ADD COLUMN "schema_updated_at" bigint;