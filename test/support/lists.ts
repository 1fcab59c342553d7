/**
 * What the list twin tests (test/twins-{notes,logs,runs-records}.test.ts) share: the date filters around a list's
 * times, many queries in one op, and the rows they need before the lists themselves: users, projects,
 * environments, teams, collections, renderings, a token, workflows with versions. Inserted with plain SQL on both
 * stores, the same ids on each (these tables' own face functions are twinned elsewhere); names chosen so that byte
 * order and a locale's order would differ (upper case before lower case, non-ASCII last).
 */
import type { Database } from 'bun:sqlite'
import type { SQL } from 'bun'
import { type DateFilter, DATE_OPERATORS } from '../../src/lib/date-filter.ts'
import type { Op } from '../../src/db/op.ts'
import type { Micros } from '../../src/lib/time.ts'
import type { PgStore } from '../../src/db/postgres/store.ts'
import type { BothStores } from './both-stores.ts'
import { freshPostgresStore } from './postgres-cluster.ts'

/**
 * Every date filter around `times`: each operator at each time, a microsecond either side, and beyond both ends, and
 * ranges between nearby times. `every`: only every n-th time (a lighter set for the less central filters).
 */
export function dateFiltersAround(field: string, allTimes: number[], every = 1): DateFilter[][] {
  const times = allTimes.filter((_, i) => i % every === 0)
  const instants = [...new Set(times.flatMap((t) => [t - 1, t, t + 1]))]
  if (times.length > 0) instants.push(Math.min(...times) - 1_000_000, Math.max(...times) + 1_000_000)
  const single = instants.flatMap((at) => DATE_OPERATORS.map((o) => [{ field, op: o, at: at as Micros }]))
  const sorted = [...new Set(times)].sort((a, b) => a - b)
  const ranges = sorted.flatMap((from, i) =>
    sorted.slice(i + 1, i + 4).map((to) => [
      { field, op: 'gte' as const, at: from as Micros },
      { field, op: 'lt' as const, at: to as Micros },
    ]),
  )
  return [[], ...single, ...ranges]
}

/** Every query in one op: each answer with the query it answers (run it on both stores and compare). */
export function* all<Q, T>(queries: Q[], ask: (q: Q) => Op<T>): Op<{ query: Q; answer: T }[]> {
  const answers = []
  for (const query of queries) answers.push({ query, answer: yield* ask(query) })
  return answers
}

/** Where seed rows go: a SQLite connection (optional: a PostgreSQL-only test has none) and a PostgreSQL pool. */
export interface SeedTargets {
  sqlite?: Database
  pg: SQL
}

export const targetsOf = (stores: BothStores): SeedTargets => ({ sqlite: stores.sqlite.store.sqlite, pg: stores.pg.sql })

export type Row = Record<string, string | number | boolean | null>

/** `rows` into `table` on both stores (booleans as SQLite's 0/1 there). */
export async function seedBoth(stores: SeedTargets, table: string, rows: Row[]): Promise<void> {
  for (const row of rows) {
    const columns = Object.keys(row)
    const values = Object.values(row)
    const names = columns.map((c) => `"${c}"`).join(', ')
    stores.sqlite
      ?.query(`INSERT INTO ${table} (${names}) VALUES (${columns.map(() => '?').join(', ')})`)
      .run(...(values.map((v) => (typeof v === 'boolean' ? Number(v) : v)) as (string | number | null)[]))
    await stores.pg.unsafe(`INSERT INTO ${table} (${names}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')})`, values)
  }
  // Explicit ids leave PostgreSQL's sequence behind; later face inserts must number on as SQLite does.
  if (rows.some((r) => typeof r.id === 'number')) {
    await stores.pg.unsafe(`SELECT setval(pg_get_serial_sequence('${table}', 'id'), (SELECT max(id) FROM ${table}))`)
  }
}

export const T0 = Date.UTC(2026, 10, 21, 12, 0, 0)

/** Users 1–4, projects 1–3, environments 1–4, teams 1–4, collections 1–5, renderings 1–4, token 1, workflows 1–3. */
export async function seedOrganization(stores: SeedTargets): Promise<void> {
  const at = { created_at: T0 - 86_400_000 }
  await seedBoth(stores, 'users', [
    { id: 1, email: 'alice@example.com', username: 'alice', is_instance_admin: true, ...at, updated_at: T0 },
    { id: 2, email: 'bob@example.com', username: 'Bob', is_instance_admin: false, ...at, updated_at: T0 },
    { id: 3, email: 'carol@example.com', username: 'carol', is_instance_admin: false, ...at, updated_at: T0 },
    { id: 4, email: 'dave@example.com', username: 'dave', is_instance_admin: false, disabled_at: T0, ...at, updated_at: T0 },
  ])
  await seedBoth(stores, 'projects', [
    { id: 1, name: 'acme', sso: false, ...at },
    { id: 2, name: 'Beta', sso: true, ...at },
    { id: 3, name: 'Zeta', sso: false, ...at },
  ])
  await seedBoth(stores, 'environments', [
    { id: 1, project_id: 1, name: 'prod', ...at },
    { id: 2, project_id: 1, name: 'Staging', ...at },
    { id: 3, project_id: 2, name: 'prod', ...at },
    { id: 4, project_id: 1, name: 'äußere', ...at },
  ])
  await seedBoth(stores, 'teams', [
    { id: 1, project_id: 1, name: 'ops', ...at },
    { id: 2, project_id: 1, name: 'Sales', ...at },
    { id: 3, project_id: 2, name: 'crew', ...at },
    { id: 4, project_id: 1, name: 'Ops-2', ...at },
  ])
  await seedBoth(stores, 'collections', [
    { id: 1, project_id: 1, name: 'orders', ...at },
    { id: 2, project_id: 1, name: 'Customers', ...at },
    { id: 3, project_id: 1, name: 'éléments', ...at },
    { id: 4, project_id: 2, name: 'things', ...at },
    { id: 5, project_id: 1, name: 'customers', ...at },
  ])
  await seedBoth(stores, 'renderings', [
    { id: 1, environment_id: 1, team_id: 1 },
    { id: 2, environment_id: 1, team_id: 2 },
    { id: 3, environment_id: 2, team_id: 1 },
    { id: 4, environment_id: 3, team_id: 3 },
  ])
  await seedBoth(stores, 'api_tokens', [
    { id: 1, name: 'ci', user_id: 1, project_id: 1, token_hash: 'h1', prefix: 'trl_ab12', scopes: '[]', created_with_sso: false, ...at },
  ])
  await seedBoth(stores, 'workflows', [
    { id: 1, rendering_id: 1, name: 'approve', collection_id: 1, ...at, updated_at: T0 },
    { id: 2, rendering_id: 2, name: 'approve', collection_id: 1, ...at, updated_at: T0 },
    { id: 3, rendering_id: 3, name: 'ship', collection_id: 2, ...at, updated_at: T0 },
  ])
  await seedBoth(stores, 'workflow_versions', [
    { id: 1, workflow_id: 1, version: 1, definition: '{}', definition_hash: 'a', published_by: 1, ...at },
    { id: 2, workflow_id: 1, version: 2, definition: '{}', definition_hash: 'b', published_by: 1, ...at },
    { id: 3, workflow_id: 2, version: 1, definition: '{}', definition_hash: 'c', published_by: 2, ...at },
    { id: 4, workflow_id: 3, version: 7, definition: '{}', definition_hash: 'd', published_by: null, ...at },
  ])
}

/** `body` on a fresh PostgreSQL database (pool of `max`) seeded with the organization alone; closed after. */
export async function withSeededPostgres(max: number, body: (pg: PgStore) => Promise<void>): Promise<void> {
  const pg = await freshPostgresStore({ max })
  try {
    await seedOrganization({ pg: pg.sql })
    await body(pg)
  } finally {
    await pg.close()
  }
}
