/**
 * Twin tests' prerequisite rows (users, projects, members, structure, notes, logs) written with the same plain SQL on
 * both stores of `bothStores()`, in the same order, so both number them alike — for rows whose own face functions
 * are twinned elsewhere. Text and names are chosen so that byte order and a locale's order differ (case,
 * punctuation), which any list ordered by text must get right on both databases.
 */
import type { BothStores } from './both-stores.ts'

/** `statements` run in order on the SQLite store and on the PostgreSQL one (`true`/`false` read alike on both). */
export async function sqlOnBoth(stores: BothStores, ...statements: string[]): Promise<void> {
  for (const statement of statements) {
    stores.sqlite.store.sqlite.run(statement)
    await stores.pg.sql.unsafe(statement)
  }
}

/**
 * A production PostgreSQL is often created in a locale (en_US.UTF-8), where `ORDER BY name` sorts case and punctuation
 * unlike SQLite's bytes; the test cluster is C.UTF-8. The names' columns here get an ICU locale's collation, so a
 * twin that orders by text without `COLLATE "C"` answers in another order than SQLite and fails.
 */
const NAMED = ['users.email', 'projects.name', 'environments.name', 'teams.name', 'collections.name', 'workflows.name']

/** Epoch ms the seeded rows were made at. */
export const SEEDED_AT = Date.UTC(2026, 10, 1)

/**
 * Users 1–6 (3 deactivated; emails out of byte order), projects 1–4 (2 with SSO), members of projects 1 and 2,
 * environments 1–4, teams 1–4, collections 1–3 with permissions, one imported note, seven activity and five admin
 * log entries (µs times 1…); on PostgreSQL, the names' columns in a locale's collation (see NAMED).
 */
export async function seedOrganization(stores: BothStores): Promise<void> {
  const t = SEEDED_AT
  for (const column of NAMED) {
    const [table, name] = column.split('.')
    await stores.pg.sql.unsafe(`ALTER TABLE ${table} ALTER COLUMN ${name} TYPE text COLLATE "en-US-x-icu"`)
  }
  await sqlOnBoth(
    stores,
    `INSERT INTO users (email, username, password_hash, is_instance_admin, disabled_at, created_at, updated_at) VALUES
      ('carol@example.com', 'carol', 'hash-c', true, NULL, ${t}, ${t}),
      ('alice@example.com', 'alice', NULL, false, NULL, ${t}, ${t + 1}),
      ('bob@example.com', 'bob', 'hash-b', false, ${t + 5}, ${t}, ${t + 5}),
      ('a_b@example.com', 'a_b', NULL, false, NULL, ${t}, ${t}),
      ('a-b@example.com', 'a-b', NULL, false, NULL, ${t}, ${t}),
      ('Zed@example.com', 'Zed', NULL, false, NULL, ${t}, ${t})`,
    `INSERT INTO projects (name, sso, created_at) VALUES ('alpha', false, ${t}), ('Beta', true, ${t}), ('beta-2', false, ${t}), ('Zeta', false, ${t})`,
    `INSERT INTO project_members (project_id, user_id, role, created_at, updated_at) VALUES
      (1, 2, 'admin', ${t}, ${t}), (1, 1, 'editor', ${t}, ${t}), (1, 3, 'admin', ${t}, ${t}), (1, 5, 'user', ${t}, ${t}),
      (2, 4, 'developer', ${t}, ${t}), (2, 6, 'admin', ${t}, ${t})`,
    `INSERT INTO environments (project_id, name, created_at) VALUES (1, 'prod', ${t}), (1, 'dev', ${t}), (1, 'Stage', ${t}), (2, 'prod', ${t})`,
    `INSERT INTO teams (project_id, name, created_at) VALUES (1, 'ops', ${t}), (1, 'Sales', ${t}), (1, 'dev-team', ${t}), (2, 'team', ${t})`,
    `INSERT INTO collections (project_id, name, created_at) VALUES (1, 'orders', ${t}), (1, 'customers', ${t}), (2, 'c', ${t})`,
    `INSERT INTO collection_permissions (collection_id, team_id, can_read, can_edit) VALUES
      (1, 1, true, false), (1, 2, true, true), (2, 1, true, false), (2, 2, false, false)`,
    `INSERT INTO notes (environment_id, team_id, collection_id, record_id, title, user_id, created_at, updated_at) VALUES
      (1, 1, 1, 'r1', 'Imported', 2, 1700000000000000, 1700000000000000)`,
    `INSERT INTO activity_logs (environment_id, type, action, user_id, created_at) VALUES
      (1, 'write', 'createNote', 2, 1), (1, 'read', 'readNote', 2, 2), (2, 'write', 'createNote', 1, 3), (1, 'write', 'x', 2, 40),
      (1, 'write', 'x', 2, 5), (1, 'write', 'x', 2, 60), (1, 'write', 'x', 2, 7)`,
    `INSERT INTO admin_logs (project_id, type, resource, initiator, user_id, created_at) VALUES
      (1, 'add', 'user', 'administrator', 1, 1), (1, 'add', 'user', 'administrator', 1, 20), (2, 'remove', 'user', 'system', NULL, 3),
      (NULL, 'update', 'user', 'administrator', 1, 4), (1, 'update', 'team', 'administrator', 1, 50)`,
  )
}
