/**
 * Applies the embedded migrations (drizzle/ → migrations.generated.ts) in order, each once, tracked by name.
 * Drizzle's own migrator reads files from disk, which a compiled binary does not have. PostgreSQL's:
 * ../postgres/migrate.ts.
 */
import type { Database } from 'bun:sqlite'
import { CHAIN_MIGRATION, type ChainUpgradeStep, chainExistingEntries } from '../chain-upgrade.ts'
import { migrations as embedded } from './migrations.generated.ts'

export interface Migration {
  name: string
  sql: string
}

const BREAKPOINT = '--> statement-breakpoint'
/** drizzle-kit's table rebuild (new table, copy, drop, rename) starts with this and ends with `foreign_keys=ON`. */
const REBUILDS_A_TABLE = /PRAGMA foreign_keys\s*=\s*OFF/i

/**
 * Runs `apply` with foreign keys off when the migration rebuilds a table, as SQLite's own procedure for a table
 * change says (https://sqlite.org/lang_altertable.html#otheralter): the PRAGMA is a no-op inside a transaction, and
 * with keys on, dropping the old table would cascade its ON DELETE to every child row (a run's steps, events…).
 * Inside the transaction, `foreign_key_check` must find nothing before the commit.
 */
function withForeignKeysOffFor(sqlite: Database, rebuildsATable: boolean, apply: () => boolean): boolean {
  if (!rebuildsATable) return apply()
  sqlite.run('PRAGMA foreign_keys = OFF')
  try {
    return apply()
  } finally {
    sqlite.run('PRAGMA foreign_keys = ON')
  }
}

function assertNoForeignKeyViolations(sqlite: Database, migration: Migration) {
  const violations = sqlite.prepare('PRAGMA foreign_key_check').all()
  if (violations.length > 0) throw new Error(`migration ${migration.name} would leave ${violations.length} rows whose foreign key has no parent`)
}

/** Links the entries written before the chain (../chain-upgrade.ts), in the migration's transaction. */
function linkExistingEntries(sqlite: Database): void {
  const steps = chainExistingEntries()
  let answer: unknown[][] = []
  for (let step = steps.next(answer); !step.done; step = steps.next(answer)) {
    const asked: ChainUpgradeStep = step.value
    if (asked.kind === 'rows') {
      answer = sqlite.prepare(asked.sql).values(...(asked.params as never[])) as unknown[][]
      continue
    }
    const update = sqlite.prepare(`UPDATE ${asked.table} SET chain_position = ?, chain_hash = ? WHERE id = ?`)
    for (const [id, position, hash] of asked.links) update.run(position, hash, id)
    answer = []
  }
}

/** Returns the names of the migrations applied by this call. Safe to run from several processes at once. */
export function migrate(sqlite: Database, migrations: Migration[] = embedded, now = Date.now()): string[] {
  sqlite.run(
    'CREATE TABLE IF NOT EXISTS trellis_migrations (name TEXT PRIMARY KEY NOT NULL, applied_at INTEGER NOT NULL)',
  )
  const applied: string[] = []
  const isApplied = sqlite.prepare('SELECT 1 FROM trellis_migrations WHERE name = ?')
  const record = sqlite.prepare('INSERT INTO trellis_migrations (name, applied_at) VALUES (?, ?)')
  for (const migration of migrations) {
    const rebuildsATable = REBUILDS_A_TABLE.test(migration.sql)
    const apply = sqlite.transaction(() => {
      if (isApplied.all(migration.name).length > 0) return false
      for (const statement of migration.sql.split(BREAKPOINT)) {
        if (statement.trim()) sqlite.run(statement)
      }
      if (rebuildsATable) assertNoForeignKeyViolations(sqlite, migration)
      if (CHAIN_MIGRATION.test(migration.name)) linkExistingEntries(sqlite)
      record.run(migration.name, now)
      return true
    })
    if (withForeignKeysOffFor(sqlite, rebuildsATable, () => apply.immediate())) applied.push(migration.name)
  }
  return applied
}

/** Names of embedded migrations not yet applied (for /readyz). */
export function pendingMigrations(sqlite: Database, migrations: Migration[] = embedded): string[] {
  const table = sqlite
    .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'trellis_migrations'")
    .all()
  if (table.length === 0) return migrations.map((m) => m.name)
  const done = new Set(
    sqlite
      .prepare('SELECT name FROM trellis_migrations')
      .all()
      .map((row) => (row as { name: string }).name),
  )
  return migrations.filter((m) => !done.has(m.name)).map((m) => m.name)
}
