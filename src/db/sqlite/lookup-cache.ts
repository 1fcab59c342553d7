/**
 * The lookup cache on SQLite (../lookup-cache.ts `cached`): the lookups cached per connection, with exact
 * invalidation (docs/design-decisions.md "Lookup cache"). An entry is used only while nothing it was read from can
 * have changed since:
 * - this connection's own writes: TEMP triggers on the tables those lookups read (api_tokens but for its
 *   `last_used_at` stamp, users, projects, project_members, team_members, environments, teams, renderings,
 *   workflows, webhook_triggers) count every insert, update and delete — whatever code made it — in a TEMP one-row
 *   counter, itself transactional (a rolled-back change rolls its count back). Reading it costs under a microsecond;
 * - other connections' commits (the CLI, another process): `PRAGMA data_version`, which changes when any other
 *   connection commits. It costs a read transaction (~8 µs), so it is read once per turn of the event loop: a
 *   change committed before a request arrives (a later turn) is seen by that request.
 * Inside a transaction the cache is not used at all: a write transaction reads what it may change, and a change it
 * makes and rolls back must never leave an entry behind. Misses (an unknown token) are never cached.
 *
 * PostgreSQL has its own cache of the same lookups (../postgres/lookup-cache.ts): several instances share its
 * database, and `data_version` only sees connections to the same SQLite file, so there a generation row moved by every
 * commit that changes these tables (the same tables and columns as WATCHED) is the signal.
 */
import type { Database, Statement } from 'bun:sqlite'
import { getTableName } from 'drizzle-orm'
import type { SQLiteTable } from 'drizzle-orm/sqlite-core'
import type { Db } from '../dialect.ts'
import { entriesOfKind, keepAnswer } from '../lookup-cache.ts'
import { apiTokens, environments, projectMembers, projects, renderings, teamMembers, teams, users, webhookTriggers, workflows } from '../schema.ts'
import { connectionOf } from './prepared.ts'

/** The tables cached lookups read, each with the columns whose updates none of them depends on. */
export const WATCHED: [SQLiteTable, string[]][] = [
  [apiTokens, ['last_used_at']],
  [users, []],
  [projects, []],
  [projectMembers, []],
  [teamMembers, []],
  [environments, []],
  [teams, []],
  [renderings, []],
  [workflows, []],
  [webhookTriggers, []],
]

const COUNTER = 'trellis_lookup_generation'

interface Cache {
  ownCount: Statement
  othersCheck: Statement
  triggers: number
  /** The own-writes count and data_version the entries were read at. */
  own: number
  others: number
  /** data_version was read during this turn of the event loop. */
  othersFresh: boolean
  entries: Map<string, Map<unknown, unknown>>
}

const caches = new WeakMap<Database, Cache | null>()

/**
 * `load()`'s answer for `key`, from this connection's cache when nothing it depends on changed since it was read.
 * `load` must read only the WATCHED tables (or columns no change of which matters to its answer).
 */
export function cachedLookup<K, V>(db: Db, kind: string, key: K, load: () => V | undefined): V | undefined {
  const connection = connectionOf(db)
  if (connection.inTransaction) return load()
  const cache = current(connection)
  if (!cache) return load()
  const entries = entriesOfKind(cache.entries, kind)
  const hit = entries.get(key) as V | undefined
  if (hit !== undefined) return hit
  const value = load()
  if (value !== undefined) keepAnswer(entries, key, value)
  return value
}

/** The connection's cache, emptied when a watched table changed since its entries were read; null when unusable. */
function current(connection: Database): Cache | null {
  let cache = caches.get(connection)
  if (cache === undefined) {
    cache = create(connection)
    caches.set(connection, cache)
  }
  if (!cache) return null
  const own = (cache.ownCount.values()[0]?.[0] as number | undefined) ?? -1
  let others = cache.others
  if (!cache.othersFresh) {
    const [dataVersion, triggers] = cache.othersCheck.values()[0] as [number, number]
    // A table rebuilt on this connection (a migration) takes its TEMP triggers with it: put them back, start over.
    if (triggers !== cache.triggers) {
      watch(connection)
      cache.entries.clear()
    }
    others = dataVersion
    cache.othersFresh = true
    const stale = cache
    setImmediate(() => (stale.othersFresh = false))
  }
  if (own !== cache.own || others !== cache.others) {
    cache.entries.clear()
    cache.own = own
    cache.others = others
  }
  return cache
}

function create(connection: Database): Cache | null {
  try {
    const triggers = watch(connection)
    return {
      ownCount: connection.prepare(`SELECT n FROM temp.${COUNTER}`),
      othersCheck: connection.prepare(
        `SELECT data_version, (SELECT count(*) FROM temp.sqlite_master WHERE type = 'trigger' AND name LIKE '${COUNTER}%') FROM pragma_data_version`,
      ),
      triggers,
      own: -1,
      others: -1,
      othersFresh: false,
      entries: new Map(),
    }
  } catch {
    // No schema yet (not migrated): look everything up.
    return null
  }
}

/** Creates the TEMP counter and triggers (when missing); returns how many triggers watch. */
function watch(connection: Database): number {
  connection.run(`CREATE TEMP TABLE IF NOT EXISTS ${COUNTER} (n INTEGER NOT NULL)`)
  connection.run(`INSERT INTO temp.${COUNTER} (n) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM temp.${COUNTER})`)
  const bump = `BEGIN UPDATE temp.${COUNTER} SET n = n + 1; END`
  let count = 0
  for (const [table, ignored] of WATCHED) {
    const name = getTableName(table)
    const columns = (connection.prepare('SELECT name FROM pragma_table_info(?)').all(name) as { name: string }[]).map((c) => c.name)
    if (columns.length === 0) throw new Error(`no table ${name}`)
    const updateOf = ignored.length === 0 ? '' : ` OF ${columns.filter((c) => !ignored.includes(c)).map((c) => `"${c}"`).join(', ')}`
    for (const [event, on] of [['insert', 'INSERT'], ['update', `UPDATE${updateOf}`], ['delete', 'DELETE']] as const) {
      connection.run(`CREATE TEMP TRIGGER IF NOT EXISTS ${COUNTER}_${name}_${event} AFTER ${on} ON main."${name}" ${bump}`)
      count++
    }
  }
  return count
}
