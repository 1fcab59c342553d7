/**
 * `trellis db copy` (issue 18, item 5): moves a deployment's SQLite database into an empty PostgreSQL database, every
 * table in the order its foreign keys need, in one PostgreSQL transaction that also sets each id sequence past the
 * copied ids and verifies every table by its row count and a checksum of its rows (read back from PostgreSQL,
 * compared with SQLite's) before it commits. A target that already holds rows is refused: nothing is merged or overwritten.
 */
import { Database } from 'bun:sqlite'
import { SQL } from 'bun'
import { createHash } from 'node:crypto'
import { migratePostgres } from './postgres/migrate.ts'

/** One table's outcome: its rows and the checksum both sides agree on. */
export interface TableCopy {
  table: string
  rows: number
  checksum: string
}

export class CopyRefused extends Error {}

const TRACKING = 'trellis_migrations'
/** Rows per INSERT (PostgreSQL allows 65,535 parameters per statement; the widest table has 16 columns). */
const BATCH = 1000

/** Copies `sqlitePath` into the PostgreSQL database at `url`; resolves with each table's rows and checksum. */
export async function copySqliteToPostgres(sqlitePath: string, url: string): Promise<TableCopy[]> {
  const source = new Database(sqlitePath, { readonly: true, strict: true })
  const sql = new SQL(url, { max: 1 })
  try {
    await migratePostgres(sql)
    const tables = tablesInDependencyOrder(source)
    const booleans = await booleanColumns(sql)
    const sequenced = await tablesWithIdSequence(sql)
    const copied = await sql.begin(async (tx) => {
      const occupied: string[] = []
      for (const { name } of tables) if (((await tx.unsafe(`SELECT 1 FROM "${name}" LIMIT 1`)) as unknown[]).length > 0) occupied.push(name)
      if (occupied.length > 0) throw new CopyRefused(`the target database is not empty (rows in ${occupied.join(', ')}): nothing was copied`)
      // One snapshot of the source for the whole copy.
      source.run('BEGIN')
      try {
        const result: TableCopy[] = []
        for (const table of tables) {
          // Named columns, in SQLite's order, on both sides (a column a migration added sits last in SQLite only).
          const columns = (source.prepare('SELECT name FROM pragma_table_info(?) ORDER BY cid').all(table.name) as { name: string }[]).map((c) => c.name)
          const list = columns.map((c) => `"${c}"`).join(', ')
          const rows = source.prepare(`SELECT ${list} FROM "${table.name}" ORDER BY ${table.order}`).values() as unknown[][]
          const isBoolean = columns.map((column) => booleans.has(`${table.name}.${column}`))
          for (let start = 0; start < rows.length; start += BATCH) {
            const batch = rows.slice(start, start + BATCH)
            const values = batch.flatMap((row) => row.map((value, i) => (isBoolean[i] && value !== null ? value === 1 : value)))
            const tuples = batch.map((_, r) => `(${columns.map((__, c) => `$${r * columns.length + c + 1}`).join(', ')})`)
            await tx.unsafe(`INSERT INTO "${table.name}" (${list}) VALUES ${tuples.join(', ')}`, values as never[])
          }
          if (sequenced.has(table.name)) {
            await tx.unsafe(`SELECT setval(pg_get_serial_sequence('"${table.name}"', 'id'), coalesce((SELECT max(id) FROM "${table.name}"), 0) + 1, false)`)
          }
          // Verified before the commit, read back in the same transaction: a mismatch leaves nothing copied.
          const back = (await tx.unsafe(`SELECT ${list} FROM "${table.name}" ORDER BY ${table.order}`).values()) as unknown[][]
          const copy = { table: table.name, rows: rows.length, checksum: checksum(rows) }
          if (back.length !== copy.rows || checksum(back) !== copy.checksum) {
            throw new Error(`verification failed for ${table.name}: ${copy.rows} rows copied (${copy.checksum}), ${back.length} read back (${checksum(back)})`)
          }
          result.push(copy)
        }
        return result
      } finally {
        source.run('COMMIT')
      }
    })
    // Planner statistics for the tables just filled: without them the first queries plan as for empty tables
    // (autovacuum's analyze comes later), e.g. a notes page over a million rows scanning instead of seeking.
    await sql.unsafe('ANALYZE')
    return copied
  } finally {
    source.close()
    await sql.close()
  }
}

/** The SQLite tables (migrations' own left out), parents before children, each with its row order. */
function tablesInDependencyOrder(source: Database): { name: string; order: string }[] {
  const names = (source.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != ?").all(TRACKING) as { name: string }[]).map((t) => t.name)
  const parents = new Map(names.map((name) => [name, new Set((source.prepare('SELECT "table" FROM pragma_foreign_key_list(?)').all(name) as { table: string }[]).map((f) => f.table).filter((t) => t !== name))]))
  const ordered: string[] = []
  while (ordered.length < names.length) {
    const ready = names.filter((name) => !ordered.includes(name) && [...parents.get(name)!].every((parent) => ordered.includes(parent)))
    if (ready.length === 0) throw new Error('the foreign keys of the SQLite schema form a cycle')
    ordered.push(...ready.sort())
  }
  return ordered.map((name) => {
    const columns = source.prepare('SELECT name, pk FROM pragma_table_info(?) ORDER BY pk, cid').all(name) as { name: string; pk: number }[]
    const key = columns.filter((c) => c.pk > 0).map((c) => c.name)
    // Ordered by the primary key (every column where there is none): the same order on both sides.
    const order = (key.length > 0 ? key : columns.map((c) => c.name)).map((c) => `"${c}"`).join(', ')
    return { name, order }
  })
}

/** `table.column` of every boolean column of the PostgreSQL schema (SQLite stores them as 0/1). */
async function booleanColumns(sql: SQL): Promise<Set<string>> {
  const rows = (await sql`SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public' AND data_type = 'boolean'`) as { table_name: string; column_name: string }[]
  return new Set(rows.map((r) => `${r.table_name}.${r.column_name}`))
}

/** The PostgreSQL tables whose `id` takes its default from a sequence (bigserial): set past the copied ids. */
async function tablesWithIdSequence(sql: SQL): Promise<Set<string>> {
  const rows = (await sql`SELECT table_name FROM information_schema.columns
    WHERE table_schema = 'public' AND column_name = 'id' AND column_default LIKE 'nextval(%'`) as { table_name: string }[]
  return new Set(rows.map((r) => r.table_name))
}

/** sha256 of the rows in order, each value written the same way on both sides (numbers and strings as text, booleans as 0/1). */
function checksum(rows: unknown[][]): string {
  const hash = createHash('sha256')
  for (const row of rows) {
    hash.update(row.map((value) => (value === null ? '\\N' : typeof value === 'boolean' ? (value ? '1' : '0') : String(value))).join('\t'))
    hash.update('\n')
  }
  return hash.digest('hex')
}
