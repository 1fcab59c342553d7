-- PROTOTYPE SCHEMA (issue 16): only the tables the two prototyped operations touch, in PostgreSQL's dialect.
-- Not the product's migrations (those are issue 18's); nothing in the app loads this file. Times are epoch
-- milliseconds as in the SQLite schema. Foreign keys to workflows, users, tokens… are left out: those tables are
-- not part of the prototype.

CREATE TABLE runs (
  id text PRIMARY KEY,
  workflow_id bigint NOT NULL,
  workflow_version_id bigint NOT NULL,
  environment_id bigint NOT NULL,
  record_id text NOT NULL,
  user_id bigint NOT NULL,
  token_id bigint,
  "trigger" text NOT NULL CHECK ("trigger" IN ('manual', 'webhook')),
  status text NOT NULL,
  next_step integer NOT NULL DEFAULT 0,
  available_at bigint NOT NULL,
  lease_owner text,
  lease_expires_at bigint,
  attempts integer NOT NULL DEFAULT 0,
  error text,
  created_at bigint NOT NULL,
  started_at bigint,
  finished_at bigint
);
-- One active run per (workflow, record): the index decides the 409, no check-then-insert race.
CREATE UNIQUE INDEX runs_one_active_per_record ON runs (workflow_id, record_id)
  WHERE status IN ('queued', 'running', 'waiting');
CREATE INDEX runs_claim_idx ON runs (available_at, id) WHERE status IN ('queued', 'waiting');

-- The newest activity createdAt of each environment. Appends lock this row (upsert) until commit, so an
-- environment's entries take their createdAt and their id in one order, strictly increasing.
CREATE TABLE activity_log_clocks (
  environment_id bigint PRIMARY KEY,
  latest_created_at bigint NOT NULL
);

CREATE TABLE activity_logs (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  environment_id bigint NOT NULL,
  type text NOT NULL CHECK (type IN ('read', 'write')),
  action text NOT NULL,
  label text,
  user_id bigint NOT NULL,
  team_id bigint,
  collection_id bigint,
  token_id bigint,
  workflow_name text,
  run_id text,
  step_name text,
  extension boolean NOT NULL DEFAULT false,
  created_at bigint NOT NULL
);
CREATE INDEX activity_logs_env_created_idx ON activity_logs (environment_id, created_at);

CREATE TABLE activity_log_records (
  log_id bigint NOT NULL REFERENCES activity_logs (id),
  environment_id bigint NOT NULL,
  record_id text NOT NULL,
  PRIMARY KEY (log_id, record_id)
);
