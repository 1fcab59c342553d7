CREATE TABLE "rate_limit_buckets" (
	"key" text PRIMARY KEY NOT NULL,
	"capacity" bigint NOT NULL,
	"tokens" double precision NOT NULL,
	"updated_at" bigint NOT NULL,
	"ends_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "rate_limit_windows" (
	"key" text PRIMARY KEY NOT NULL,
	"count" bigint NOT NULL,
	"max_count" bigint NOT NULL,
	"ends_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "rate_limit_buckets_ends_at_idx" ON "rate_limit_buckets" USING btree ("ends_at");--> statement-breakpoint
CREATE INDEX "rate_limit_windows_ends_at_idx" ON "rate_limit_windows" USING btree ("ends_at");