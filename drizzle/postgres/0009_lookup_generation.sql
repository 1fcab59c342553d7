-- The lookup cache's cross-instance signal (issue 31; src/db/postgres/lookup-cache.ts): one generation number that
-- every committed change of a table the cached lookups read moves on. Each instance reads it (one row, once per turn
-- of its event loop) before answering a lookup from its cache, and empties the cache when it moved.
-- The bump is a deferred constraint trigger: it runs at COMMIT, after every other lock the transaction takes, so
-- the generation row is the last lock it waits for (no deadlock with the rule locks), and once per transaction.
CREATE TABLE "lookup_generation" (
	"id" smallint PRIMARY KEY NOT NULL CHECK ("id" = 1),
	"n" bigint NOT NULL,
	"bumped_by" xid8
);
--> statement-breakpoint
INSERT INTO "lookup_generation" ("id", "n") VALUES (1, 0);
--> statement-breakpoint
CREATE FUNCTION trellis_bump_lookup_generation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE "lookup_generation" SET "n" = "n" + 1, "bumped_by" = pg_current_xact_id()
	WHERE "id" = 1 AND "bumped_by" IS DISTINCT FROM pg_current_xact_id();
	RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "lookup_generation_api_tokens" AFTER INSERT OR DELETE OR UPDATE OF "id", "name", "user_id", "project_id", "token_hash", "prefix", "scopes", "created_with_sso", "created_at", "expires_at", "revoked_at", "parent_token_id" ON "api_tokens"
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION trellis_bump_lookup_generation();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "lookup_generation_users" AFTER INSERT OR UPDATE OR DELETE ON "users"
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION trellis_bump_lookup_generation();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "lookup_generation_projects" AFTER INSERT OR UPDATE OR DELETE ON "projects"
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION trellis_bump_lookup_generation();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "lookup_generation_project_members" AFTER INSERT OR UPDATE OR DELETE ON "project_members"
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION trellis_bump_lookup_generation();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "lookup_generation_team_members" AFTER INSERT OR UPDATE OR DELETE ON "team_members"
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION trellis_bump_lookup_generation();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "lookup_generation_environments" AFTER INSERT OR UPDATE OR DELETE ON "environments"
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION trellis_bump_lookup_generation();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "lookup_generation_teams" AFTER INSERT OR UPDATE OR DELETE ON "teams"
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION trellis_bump_lookup_generation();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "lookup_generation_renderings" AFTER INSERT OR UPDATE OR DELETE ON "renderings"
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION trellis_bump_lookup_generation();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "lookup_generation_workflows" AFTER INSERT OR UPDATE OR DELETE ON "workflows"
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION trellis_bump_lookup_generation();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "lookup_generation_webhook_triggers" AFTER INSERT OR UPDATE OR DELETE ON "webhook_triggers"
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION trellis_bump_lookup_generation();
