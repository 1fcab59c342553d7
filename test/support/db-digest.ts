/**
 * A digest of what a database holds, to prove that a refused request wrote nothing: per table, its row count and a
 * hash of its rows (every column, rows in a fixed order). Taken in a few milliseconds on the Acme fixture, so a fuzz
 * run can take one around every request. Left out is what counts that a request came rather than what it changed:
 * - `api_tokens.last_used_at`, the stamp a token gets when it authenticates, whatever the answer (at most once a
 *   minute, src/modules/auth/service.ts);
 * - PostgreSQL's `rate_limit_windows` and `rate_limit_buckets`, the counters of the API budget, the webhook rate and
 *   the login throttle, shared by the instances (on SQLite the same counters live in the process's memory): counting
 *   a refused attempt is their job (a failed login counts);
 * - PostgreSQL's `list_sequencer`, the watermark of the lists read in commit order, `notes_kept_times`, the
 *   imported notes its pass has still to list, and `runs_unlisted` and `tasks_unlisted`, the runs and tasks it has still to list: any reader of such a list may pass it forward
 *   (src/db/postgres/list-watermark.ts), and a live event stream does so on its own clock, so it moves under a refused
 *   request without that request writing anything. For the same reason the digest is taken once every activity entry
 *   note, run and task committed is listed (the pass dates them, and chains the entries, after their commit).
 */
import type { TestStore } from '../helpers.ts'

/** Table name → `<row count>:<hash of the rows>`. */
export type Digest = Record<string, string>

const IGNORED_TABLES = new Set(['rate_limit_windows', 'rate_limit_buckets', 'list_sequencer', 'notes_kept_times', 'runs_unlisted', 'tasks_unlisted'])
const IGNORED_COLUMNS: Record<string, string[]> = { api_tokens: ['last_used_at'] }

interface Table {
  name: string
  columns: string[]
}

const quoted = (name: string) => `"${name.replaceAll('"', '""')}"`
const kept = (table: string, column: string) => !(IGNORED_COLUMNS[table] ?? []).includes(column)

/** The digest of every table of `store` (see the file comment for what it leaves out). */
export async function databaseDigest(store: TestStore): Promise<Digest> {
  if (store.kind === 'sqlite') {
    const digest: Digest = {}
    for (const table of sqliteTables(store.sqlite)) {
      const rows = store.sqlite.prepare(`SELECT ${table.columns.map(quoted).join(', ')} FROM ${quoted(table.name)} ORDER BY rowid`).values()
      digest[table.name] = `${rows.length}:${Bun.hash(JSON.stringify(rows)).toString(36)}`
    }
    return digest
  }
  for (const list of ['activity_logs', 'notes', 'runs', 'tasks'] as const) await store.awaitListed(list) // dated by the lists' pass
  const tables = await postgresTables(store.sql)
  // One round trip: each table's count and the md5 of its rows' text, in text order.
  const each = tables.map(
    (t) =>
      `SELECT '${t.name}' AS name, count(*) || ':' || coalesce(md5(string_agg(r, '|' ORDER BY r)), '') AS digest FROM (SELECT ROW(${t.columns.map(quoted).join(', ')})::text AS r FROM ${quoted(t.name)}) rows`,
  )
  const rows = (await store.sql.unsafe(each.join(' UNION ALL '))) as { name: string; digest: string }[]
  return Object.fromEntries(rows.map((row) => [row.name, row.digest]))
}

/** The tables whose digest differs, each with both digests (`notes 3:… → 4:…`). */
export function changedTables(before: Digest, after: Digest): string[] {
  const names = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort()
  return names.filter((name) => before[name] !== after[name]).map((name) => `${name} ${before[name] ?? 'absent'} → ${after[name] ?? 'absent'}`)
}

const sqliteTableLists = new WeakMap<object, Table[]>()

function sqliteTables(sqlite: import('bun:sqlite').Database): Table[] {
  let tables = sqliteTableLists.get(sqlite)
  if (!tables) {
    const names = sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as { name: string }[]
    tables = names
      .filter(({ name }) => !IGNORED_TABLES.has(name))
      .map(({ name }) => ({ name, columns: (sqlite.prepare(`PRAGMA table_info(${quoted(name)})`).all() as { name: string }[]).map((c) => c.name).filter((c) => kept(name, c)) }))
    sqliteTableLists.set(sqlite, tables)
  }
  return tables
}

const postgresTableLists = new WeakMap<object, Promise<Table[]>>()

function postgresTables(sql: Bun.SQL): Promise<Table[]> {
  let tables = postgresTableLists.get(sql)
  if (!tables) {
    tables = (async () => {
      const columns = (await sql.unsafe(
        "SELECT table_name AS name, column_name AS column FROM information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, ordinal_position",
      )) as { name: string; column: string }[]
      const byTable = new Map<string, string[]>()
      for (const { name, column } of columns) {
        if (IGNORED_TABLES.has(name) || !kept(name, column)) continue
        byTable.set(name, [...(byTable.get(name) ?? []), column])
      }
      return [...byTable].map(([name, cols]) => ({ name, columns: cols }))
    })()
    postgresTableLists.set(sql, tables)
  }
  return tables
}
