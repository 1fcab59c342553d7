/**
 * Applies the embedded PostgreSQL migrations (drizzle/postgres/ → migrations.generated.ts) in order, each once,
 * tracked by name in `trellis_migrations` as SQLite's are (../sqlite/migrate.ts). Each migration and its record commit
 * together; an advisory lock lets several instances start at once: one applies, the others wait and find
 * nothing left to do.
 */
import type { SQL } from 'bun'
import { CHAIN_MIGRATION, type ChainUpgradeStep, chainExistingEntries } from '../chain-upgrade.ts'
import { migrations as embedded } from './migrations.generated.ts'

const BREAKPOINT = '--> statement-breakpoint'
/** The advisory lock key of the migrator (any constant shared by every instance). */
const MIGRATION_LOCK = 7_316_100

/** Names of embedded migrations not yet applied (/readyz). */
export async function pendingPostgresMigrations(sql: SQL, migrations: { name: string }[] = embedded): Promise<string[]> {
  const [table] = (await sql`SELECT to_regclass('trellis_migrations') IS NOT NULL AS present`) as { present: boolean }[]
  if (!table?.present) return migrations.map((m) => m.name)
  const done = new Set(((await sql`SELECT name FROM trellis_migrations`) as { name: string }[]).map((row) => row.name))
  return migrations.filter((m) => !done.has(m.name)).map((m) => m.name)
}

/**
 * Links the entries written before the chain (../chain-upgrade.ts), in the migration's transaction (under the
 * migrator's lock): each page's links in one statement.
 */
async function linkExistingEntries(tx: SQL): Promise<void> {
  const steps = chainExistingEntries()
  let answer: unknown[][] = []
  for (let step = steps.next(answer); !step.done; step = steps.next(answer)) {
    const asked: ChainUpgradeStep = step.value
    if (asked.kind === 'rows') {
      let n = 0
      answer = (await tx.unsafe(asked.sql.replace(/\?/g, () => `$${++n}`), asked.params as never[]).values()) as unknown[][]
      continue
    }
    const column = (k: number) => asked.links.map((link) => link[k])
    await tx.unsafe(
      `UPDATE ${asked.table} AS l SET chain_position = u.position, chain_hash = u.hash
        FROM unnest($1::int8[], $2::int8[], $3::text[]) AS u(id, position, hash) WHERE l.id = u.id`,
      [column(0), column(1), column(2)] as never[],
    )
    answer = []
  }
}

/** Returns the names of the migrations applied by this call. */
export async function migratePostgres(sql: SQL, migrations: { name: string; sql: string }[] = embedded, now = Date.now()): Promise<string[]> {
  return sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`
    await tx.unsafe('CREATE TABLE IF NOT EXISTS trellis_migrations (name text PRIMARY KEY NOT NULL, applied_at bigint NOT NULL)')
    const done = new Set(((await tx`SELECT name FROM trellis_migrations`) as { name: string }[]).map((row) => row.name))
    const applied: string[] = []
    for (const migration of migrations) {
      if (done.has(migration.name)) continue
      for (const statement of migration.sql.split(BREAKPOINT)) if (statement.trim()) await tx.unsafe(statement)
      if (CHAIN_MIGRATION.test(migration.name)) await linkExistingEntries(tx)
      await tx`INSERT INTO trellis_migrations (name, applied_at) VALUES (${migration.name}, ${now})`
      applied.push(migration.name)
    }
    return applied
  }) as Promise<string[]>
}
