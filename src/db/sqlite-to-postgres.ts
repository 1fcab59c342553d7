/**
 * `trellis db copy`: moves a deployment's SQLite database into an empty PostgreSQL database, every
 * table in the order its foreign keys need, in one PostgreSQL transaction that also sets each id sequence past the
 * copied ids and verifies every table by its row count and a checksum of its rows (read back from PostgreSQL,
 * compared with SQLite's) before it commits. A target that already holds rows is refused: nothing is merged or overwritten.
 *
 * Bulk and in bounded memory: each table streams from SQLite row by row into `COPY … FROM STDIN`
 * (PostgreSQL's text format) and back out of `COPY … TO STDOUT`, both checksummed as they pass; no table is ever
 * held whole. The target's foreign keys and plain indexes are dropped for the load and rebuilt before the commit
 * (`withoutForeignKeysAndIndexes`).
 */
import { Database } from 'bun:sqlite'
import type { SQL, TransactionSQL } from 'bun'
import { createHash } from 'node:crypto'
import { type Progress, type ProgressStep, silentProgress } from '../lib/progress.ts'
import { migratePostgres } from './postgres/migrate.ts'
import { UNLISTED } from './postgres/dialect.ts'

/** One table's outcome: its rows and the checksum both sides agree on. */
export interface TableCopy {
  table: string
  rows: number
  checksum: string
}

export class CopyRefused extends Error {}

const TRACKING = 'trellis_migrations'
/** Characters of COPY text sent at once (the stream applies backpressure beyond). */
const CHUNK_CHARS = 1 << 20

/**
 * What the copy must know of a PostgreSQL column: a boolean is written differently from SQLite's 0/1; text sorts by
 * the database's collation unless told to sort by its bytes, as SQLite does. (Every other column of Trellis is bigint.)
 */
type ColumnKind = 'boolean' | 'text' | 'other'

interface Table {
  name: string
  /** Named columns, in SQLite's order, on both sides (a column a migration added sits last in SQLite only). */
  columns: string[]
  kinds: ColumnKind[]
  /**
   * The primary key (every column where there is none) as SQLite sorts it, and PostgreSQL the same way (text by its
   * bytes, `COLLATE "C"`, as SQLite's BINARY collation does): the same row order on both sides.
   */
  order: { sqlite: string; postgres: string }
}

/**
 * Copies `sqlitePath` into the PostgreSQL database at `url`; resolves with each table's rows and checksum. `progress`
 * hears of each table (rows copied, then read back), of the rebuilt indexes and foreign keys, and of the ANALYZE.
 */
export async function copySqliteToPostgres(sqlitePath: string, url: string, progress: Progress = silentProgress): Promise<TableCopy[]> {
  // safeIntegers: every integer exactly, past 2^53 too.
  const source = new Database(sqlitePath, { readonly: true, strict: true, safeIntegers: true })
  const sql = new Bun.SQL(url, { max: 1 })
  try {
    await migratePostgres(sql)
    const kinds = await columnKinds(sql)
    const tables = tablesInDependencyOrder(source, kinds)
    const sequenced = await tablesWithIdSequence(sql)
    const copied = await sql.begin(async (tx) => {
      // The lookup cache's deferred triggers (drizzle/postgres/0009) fire at each statement's end instead of at COMMIT:
      // PostgreSQL refuses to build an index on a table with trigger events still pending.
      await tx.unsafe('SET CONSTRAINTS ALL IMMEDIATE')
      const occupied: string[] = []
      for (const { name } of tables) if (((await tx.unsafe(`SELECT 1 FROM "${name}" LIMIT 1`)) as unknown[]).length > 0) occupied.push(name)
      if (occupied.length > 0) throw new CopyRefused(`the target database is not empty (rows in ${occupied.join(', ')}): nothing was copied`)
      // One snapshot of the source for the whole copy.
      source.run('BEGIN')
      let result: TableCopy[]
      try {
        result = await withoutForeignKeysAndIndexes(tx, progress, async () => {
          const copiedTables: TableCopy[] = []
          for (const table of tables) copiedTables.push(await copyTable(tx, source, table, sequenced.has(table.name), progress))
          await listEverythingCopied(tx)
          return copiedTables
        })
      } finally {
        source.run('COMMIT')
      }
      // The collections' indexed fields, once SQLite's snapshot is let go: SQLite's field indexes are its own
      // expressions, so PostgreSQL's are built from the copied schemas (drizzle/postgres/0027_record_field_indexes_by_kind.sql).
      const fieldIndexes = progress.step('field indexes', null)
      await tx.unsafe('SELECT trellis_build_record_field_indexes()')
      fieldIndexes.done()
      return result
    })
    // Planner statistics for the tables just filled: without them the first queries plan as for empty tables
    // (autovacuum's analyze comes later), e.g. a notes page over a million rows scanning instead of seeking.
    const analyze = progress.step('ANALYZE', null)
    await sql.unsafe('ANALYZE')
    analyze.done()
    return copied
  } finally {
    source.close()
    await sql.close()
  }
}

/** One table: its rows streamed in, its id sequence set past them, read back and compared. */
async function copyTable(tx: TransactionSQL, source: Database, table: Table, sequenced: boolean, progress: Progress): Promise<TableCopy> {
  const total = Number((source.prepare(`SELECT count(*) AS n FROM "${table.name}"`).get() as { n: bigint }).n)
  const step = progress.step(table.name, total)
  const sent = await copyIn(tx, source, table, step)
  if (sequenced) {
    await tx.unsafe(`SELECT setval(pg_get_serial_sequence('"${table.name}"', 'id'), coalesce((SELECT max(id) FROM "${table.name}"), 0) + 1, false)`)
  }
  // Verified before the commit, read back in the same transaction: a mismatch leaves nothing copied.
  const back = await readBack(tx, table, step)
  if (back.rows !== sent.rows || back.checksum !== sent.checksum) {
    throw new Error(`verification failed for ${table.name}: ${sent.rows} rows copied (${sent.checksum}), ${back.rows} read back (${back.checksum})`)
  }
  step.done(sent.rows)
  return { table: table.name, ...sent }
}

/**
 * Runs `load` with the target's foreign keys and plain (non-unique) indexes dropped, then builds them again from the
 * definitions PostgreSQL gives for them, as pg_restore does: a foreign key checked row by row costs a query per row
 * (measured: 65 s for a million rows with them, 21 s without), an index filled in key order after the rows is one
 * sort. Adding a foreign key checks every row at once, so nothing goes unchecked; and before the commit, the rebuilt
 * definitions must equal the dropped ones. All of it inside the copy's transaction: a failure leaves the schema whole.
 */
async function withoutForeignKeysAndIndexes<T>(tx: TransactionSQL, progress: Progress, load: () => Promise<T>): Promise<T> {
  const before = await deferredSchema(tx)
  for (const key of before.foreignKeys) await tx.unsafe(`ALTER TABLE ${key.table} DROP CONSTRAINT ${quoted(key.name)}`)
  for (const index of before.indexes) await tx.unsafe(`DROP INDEX ${index.qualified}`)
  const loaded = await load()
  const indexes = progress.step(`indexes (${before.indexes.length})`, null)
  for (const index of before.indexes) await tx.unsafe(index.definition)
  indexes.done()
  const keys = progress.step(`foreign keys (${before.foreignKeys.length})`, null)
  for (const key of before.foreignKeys) await tx.unsafe(`ALTER TABLE ${key.table} ADD CONSTRAINT ${quoted(key.name)} ${key.definition}`)
  keys.done()
  const after = await deferredSchema(tx)
  if (JSON.stringify(after) !== JSON.stringify(before)) throw new Error('the foreign keys and indexes rebuilt after the copy differ from the schema\'s')
  return loaded
}

const quoted = (name: string) => `"${name.replaceAll('"', '""')}"`

/** The public schema's foreign keys and plain indexes (neither unique nor behind a constraint), as PostgreSQL writes them. */
async function deferredSchema(tx: TransactionSQL) {
  const foreignKeys = (await tx.unsafe(`SELECT conrelid::regclass::text AS "table", conname AS name, pg_get_constraintdef(oid) AS definition
    FROM pg_constraint WHERE contype = 'f' AND connamespace = 'public'::regnamespace ORDER BY 1, 2`)) as { table: string; name: string; definition: string }[]
  const indexes = (await tx.unsafe(`SELECT i.indexrelid::regclass::text AS qualified, pg_get_indexdef(i.indexrelid) AS definition
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    WHERE c.relnamespace = 'public'::regnamespace AND NOT i.indisunique AND NOT i.indisprimary
      AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
    ORDER BY 1`)) as { qualified: string; definition: string }[]
  return { foreignKeys: [...foreignKeys], indexes: [...indexes] }
}

/**
 * Streams the table's rows from SQLite into `COPY … FROM STDIN`, in the order of its key. The checksum is a sha256 of
 * the COPY text sent: one line per row, each value as `copyText` writes it.
 */
async function copyIn(tx: TransactionSQL, source: Database, table: Table, step: ProgressStep): Promise<{ rows: number; checksum: string }> {
  const list = table.columns.map((c) => `"${c}"`).join(', ')
  const query = tx.unsafe(`COPY "${table.name}" (${list}) FROM STDIN`)
  const writer = query.writable().getWriter()
  const hash = createHash('sha256')
  let rows = 0
  let chunk = ''
  const send = async () => {
    hash.update(chunk)
    await writer.write(chunk)
    chunk = ''
    step.update(rows, 'copying')
  }
  try {
    step.update(0, 'copying')
    const select = source.prepare(`SELECT ${list} FROM "${table.name}" ORDER BY ${table.order.sqlite}`)
    for (const row of select.iterate() as Iterable<Record<string, unknown>>) {
      chunk += `${table.columns.map((column, i) => copyText(row[column], table.kinds[i]!, table.name, column)).join('\t')}\n`
      rows++
      if (chunk.length >= CHUNK_CHARS) await send()
    }
    if (chunk.length > 0) await send()
    await writer.close()
  } catch (error) {
    // Stores nothing; the COPY's own rejection is this error's echo (the transaction rolls back on the throw).
    await writer.abort(error).catch(() => {})
    await Promise.resolve(query).catch(() => {})
    throw error
  }
  const { count } = (await query) as unknown as { count: number }
  if (count !== rows) throw new Error(`verification failed for ${table.name}: ${rows} rows sent, PostgreSQL stored ${count}`)
  return { rows, checksum: hash.digest('hex') }
}

/**
 * Reads the table back from PostgreSQL (`COPY … TO STDOUT`, the same order) and checksums the text as it comes:
 * PostgreSQL writes every value as `copyText` does, so the same rows give the same bytes.
 */
async function readBack(tx: TransactionSQL, table: Table, step: ProgressStep): Promise<{ rows: number; checksum: string }> {
  const list = table.columns.map((c) => `"${c}"`).join(', ')
  const query = tx.unsafe(`COPY (SELECT ${list} FROM "${table.name}" ORDER BY ${table.order.postgres}) TO STDOUT`)
  const hash = createHash('sha256')
  let rows = 0
  step.update(0, 'verifying')
  for await (const bytes of query.readable()) {
    hash.update(bytes)
    for (let i = bytes.indexOf(NEWLINE); i !== -1; i = bytes.indexOf(NEWLINE, i + 1)) rows++
    step.update(rows, 'verifying')
  }
  return { rows, checksum: hash.digest('hex') }
}

/** Ends a row of COPY text (a newline inside a value is written `\n`). */
const NEWLINE = 0x0a

/**
 * A SQLite value as a field of PostgreSQL's COPY text format, written exactly as PostgreSQL writes it back: `\N` for
 * NULL; backslash, backspace, form feed, newline, carriage return, tab and vertical tab escaped; an integer in digits;
 * a boolean `t`/`f` (SQLite keeps 0/1: anything else is refused by name).
 */
function copyText(value: unknown, kind: ColumnKind, table: string, column: string): string {
  if (value === null) return '\\N'
  if (kind === 'boolean') {
    if (value === 0n || value === 1n) return value === 1n ? 't' : 'f'
    throw new Error(`${table}.${column} holds ${String(value)}, not a boolean (0 or 1)`)
  }
  if (typeof value === 'string') return value.replace(ESCAPED, (c) => ESCAPES[c]!)
  if (typeof value === 'bigint' || typeof value === 'number') return String(value)
  throw new Error(`${table}.${column} holds a ${value instanceof Uint8Array ? 'blob' : typeof value}, which no PostgreSQL column of Trellis takes`)
}

const ESCAPED = /[\\\b\f\n\r\t\v]/g
const ESCAPES: Record<string, string> = { '\\': '\\\\', '\b': '\\b', '\f': '\\f', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\v': '\\v' }

/**
 * The SQLite tables (migrations' own left out, and Litestream's bookkeeping, `_litestream_seq` and `_litestream_lock`,
 * which it adds to a file it replicates), parents before children, each with its columns and row order.
 */
function tablesInDependencyOrder(source: Database, kinds: Map<string, ColumnKind>): Table[] {
  const names = (
    source.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '\\_litestream\\_%' ESCAPE '\\' AND name != ?").all(TRACKING) as { name: string }[]
  ).map((t) => t.name)
  const parents = new Map(names.map((name) => [name, new Set((source.prepare('SELECT "table" FROM pragma_foreign_key_list(?)').all(name) as { table: string }[]).map((f) => f.table).filter((t) => t !== name))]))
  const ordered: string[] = []
  while (ordered.length < names.length) {
    const ready = names.filter((name) => !ordered.includes(name) && [...parents.get(name)!].every((parent) => ordered.includes(parent)))
    if (ready.length === 0) throw new Error('the foreign keys of the SQLite schema form a cycle')
    ordered.push(...ready.sort())
  }
  return ordered.map((name) => {
    const columns = (source.prepare('SELECT name FROM pragma_table_info(?) ORDER BY cid').all(name) as { name: string }[]).map((c) => c.name)
    const keyed = source.prepare('SELECT name, pk FROM pragma_table_info(?) ORDER BY pk, cid').all(name) as { name: string; pk: bigint }[]
    const key = keyed.filter((c) => c.pk > 0n).map((c) => c.name)
    const kindOf = (column: string) => kinds.get(`${name}.${column}`) ?? 'other'
    const sorted = key.length > 0 ? key : columns
    // A table without a key sorts by every column, nullable ones too (a task's assignee is a team or a user): SQLite
    // puts NULLs first, PostgreSQL last unless told.
    const order = {
      sqlite: sorted.map((c) => `"${c}"`).join(', '),
      postgres: sorted.map((c) => `"${c}"${kindOf(c) === 'text' ? ' COLLATE "C"' : ''} NULLS FIRST`).join(', '),
    }
    return { name, columns, kinds: columns.map(kindOf), order }
  })
}

/** `table.column` of every boolean and text column of the PostgreSQL schema. */
async function columnKinds(sql: SQL): Promise<Map<string, ColumnKind>> {
  const rows = (await sql`SELECT table_name, column_name, data_type FROM information_schema.columns
    WHERE table_schema = 'public' AND data_type IN ('boolean', 'text')`) as { table_name: string; column_name: string; data_type: 'boolean' | 'text' }[]
  return new Map(rows.map((r) => [`${r.table_name}.${r.column_name}`, r.data_type]))
}

/**
 * The PostgreSQL tables whose `id` takes its default from a sequence (bigserial, or a list's watermarked id:
 * `trellis_sequenced_id`, ./postgres/list-watermark.ts): set past the copied ids.
 */
async function tablesWithIdSequence(sql: SQL): Promise<Set<string>> {
  const rows = (await sql`SELECT table_name FROM information_schema.columns
    WHERE table_schema = 'public' AND column_name = 'id' AND (column_default LIKE 'nextval(%' OR column_default LIKE 'trellis_sequenced_id(%')`) as { table_name: string }[]
  return new Set(rows.map((r) => r.table_name))
}

/**
 * The copied rows of the watermarked lists as readable (their watermark at their newest id): the copy is the one
 * writer of a database it found empty, and its ids are the source's, not drawn. The runs and the tasks draw no id but
 * a position in a table of their own (`UNLISTED`), which a copied row has none of: listed as it is.
 */
async function listEverythingCopied(tx: TransactionSQL): Promise<void> {
  // Each list is named by its table.
  for (const { list } of (await tx.unsafe('SELECT list FROM list_sequencer')) as { list: string }[]) {
    const newest = list in UNLISTED ? 'coalesce(pg_sequence_last_value(seq), 0)' : `coalesce((SELECT max(id) FROM "${list}"), 0)`
    await tx.unsafe(`UPDATE list_sequencer SET through = ${newest}, marks_through = '{}', marks_xid = '{}' WHERE list = $1`, [list])
  }
}
