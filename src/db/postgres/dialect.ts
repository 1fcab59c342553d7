/**
 * The PostgreSQL dialect of the storage queries (../dialect.ts, ../query.ts): the same query functions built with
 * Drizzle's pg-core builder over ./schema.ts's tables, text compared byte by byte (`COLLATE "C"`, as SQLite's
 * BINARY), and id lists as `= ANY` of a JSON array. A query runs awaited on the handle it is given: the pool, or the
 * transaction's reserved connection.
 */
import { type AnyColumn, type SQL, sql } from 'drizzle-orm'
import { type Db, type Dialect, identifierField, type RecordFieldValue, type RecordValueKind, type Tables, valueRowsOf, type WatermarkedList } from '../dialect.ts'
import type { QueryCall } from '../op.ts'
import { answerBeforeCommit, noteRunsLocked } from './monotonic.ts'
import { preparedOn } from './prepared.ts'
import * as tables from './schema.ts'
import type { PgDb } from './client.ts'

/** A date-time as a schema takes it (../../modules/records/schema.ts), as a POSIX pattern. */
const DATETIME_SHAPE = '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})$'

/**
 * A record's top-level field as PostgreSQL's field index holds it and a records list compares it: null when the field
 * is absent or its JSON value is not of the kind; text in byte order (`COLLATE "C"`, as SQLite's BINARY), numbers as
 * `numeric`, booleans as the text `true`/`false`. A date-time's index holds its text. The field is written into the
 * SQL (an index cannot hold a placeholder). drizzle/postgres/0027_record_field_indexes_by_kind.sql builds the same
 * expressions for the indexes of collections stored before it (and for `trellis db copy`).
 */
export function recordFieldOfKind(field: string, kind: RecordValueKind): string {
  const name = identifierField(field)
  const ofType = (type: string, value: string) => `(CASE WHEN jsonb_typeof(data::jsonb -> '${name}') = '${type}' THEN ${value} END)`
  const text = `(data::jsonb ->> '${name}')`
  switch (kind) {
    case 'number': return ofType('number', `${text}::numeric`)
    case 'boolean': return ofType('boolean', text)
    case 'text':
    case 'datetime': return `(${ofType('string', text)} COLLATE "C")`
  }
}

const postgresFragments: Omit<Dialect, 'db' | 'valueRows'> = {
  name: 'postgres',
  // The same tables in PostgreSQL's column types (bigint in number mode, boolean): the rows answer alike.
  t: tables as unknown as Tables,
  byteOrder: (column: AnyColumn | SQL) => sql`${column} COLLATE "C"`,
  inJsonArray: (column: AnyColumn | SQL, placeholder: string, type: 'integer' | 'text') =>
    sql`${column} = ANY (ARRAY(SELECT value::${sql.raw(type === 'integer' ? 'int8' : 'text')} FROM json_array_elements_text(${sql.placeholder(placeholder)}::text::json)))`,
  materialized: sql.raw('MATERIALIZED'),
  isFalse: (column: AnyColumn) => sql`${column} = false`,
  number: (expression: AnyColumn | SQL) => sql`${expression}::float8`,
  jsonFieldText: (column: AnyColumn | SQL, field: string) => sql`(${column}::jsonb ->> ${sql.placeholder(field)}::text)`,
  // One statement (a DO block) for the index and the statistics of its expression, both named `name`.
  createRecordFieldIndex: (name: string, collectionId: number, field: string, kind: RecordValueKind) => {
    const value = recordFieldOfKind(field, kind)
    return sql.raw(`DO $$ BEGIN
      CREATE INDEX IF NOT EXISTS "${name}" ON records (environment_id, ${value} NULLS FIRST, id) WHERE collection_id = ${Math.trunc(collectionId)};
      CREATE STATISTICS IF NOT EXISTS "${name}" ON (${value}) FROM records;
    END $$`)
  },
  dropRecordFieldIndex: (name: string) => sql.raw(`DO $$ BEGIN DROP INDEX IF EXISTS "${name}"; DROP STATISTICS IF EXISTS "${name}"; END $$`),
  recordFieldValue: (field: string, kind: RecordValueKind): RecordFieldValue => {
    const ofKind = sql.raw(recordFieldOfKind(field, kind))
    // Null unless of the kind: every comparison with it is false then, so a filter needs no test of the kind (a test
    // PostgreSQL cannot estimate: beside it, plans read every matching row to sort them).
    const always = sql`TRUE`
    switch (kind) {
      // Byte order, as SQLite compares text.
      case 'text': return { value: ofKind, hasKind: always, param: (p) => p, cursorKey: ofKind, cursorParam: (p) => p }
      case 'boolean': return { value: ofKind, hasKind: always, param: (p) => sql`${p}::text`, cursorKey: ofKind, cursorParam: (p) => sql`${p}::text` }
      case 'number': return { value: ofKind, hasKind: always, param: (p) => sql`${p}::numeric`, cursorKey: sql`${ofKind}::text`, cursorParam: (p) => sql`${p}::text::numeric` }
      case 'datetime': {
        // Only text shaped as a date-time is read as one, and an impossible one (Feb 30) is null: a failed cast would
        // fail the whole query (trellis_datetime_or_null, a migration's function). Not an index expression: the cast
        // depends on the session's time zone setting.
        const text = sql.raw(recordFieldOfKind(field, 'text'))
        const value = sql`(CASE WHEN ${text} ~ ${sql.raw(`'${DATETIME_SHAPE}'`)} THEN trellis_datetime_or_null(${text}) END)`
        return { value, hasKind: always, param: (p) => sql`${p}::text::timestamptz`, cursorKey: sql`${value}::text`, cursorParam: (p) => sql`${p}::text::timestamptz` }
      }
    }
  },
  orderNullsLow: (expression: AnyColumn | SQL, direction: 'asc' | 'desc') => sql`${expression} ${sql.raw(direction === 'asc' ? 'ASC NULLS FIRST' : 'DESC NULLS LAST')}`,
  asciiLower: (expression: AnyColumn | SQL) => sql`translate(${expression}, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')`,
  forShare: <Q>(select: Q) => (select as unknown as { for(strength: 'share'): Q }).for('share'),
  forUpdate: <Q>(select: Q) => (select as unknown as { for(strength: 'update'): Q }).for('update'),
  listed: (list: WatermarkedList, id: SQL) => {
    const unlisted = UNLISTED[list as keyof typeof UNLISTED]
    return unlisted === undefined
      ? sql`${id} <= (SELECT through FROM list_sequencer WHERE list = ${sql.raw(`'${list}'`)})`
      : sql`NOT EXISTS (SELECT 1 FROM ${sql.raw(unlisted.table)} u WHERE u.${sql.raw(unlisted.column)} = ${id})`
  },
}

/**
 * The lists whose ids are UUIDs handed out before their order is known: each row waits in a table of its own, with
 * the list position it drew, until the lists' pass lists it (drizzle/postgres/0032, 0033).
 */
export const UNLISTED = { runs: { table: 'runs_unlisted', column: 'run_id' }, tasks: { table: 'tasks_unlisted', column: 'task_id' } } as const

/** The PostgreSQL dialect over this handle (the pool, or a transaction's connection). */
export function postgresDialect(db: PgDb): Dialect {
  // pg-core's builder has the methods the queries use, under SQLite's types (../dialect.ts).
  const builder = db as unknown as Db
  // The client's result arrays copied into plain ones, as SQLite's answers are.
  return { ...postgresFragments, db: builder, valueRows: (query) => valueRowsOf(builder, query, (rows) => [...rows]) }
}

/**
 * PostgreSQL's runner of a query written once (SQLite's: ../sqlite/dialect.ts `runQuery`): a statement compiled once,
 * then awaited — or, a named `sent` statement in a write's transaction, sent and left for the write to await
 * (./monotonic.ts `answerBeforeCommit`).
 */
export async function runQueryOnPostgres(db: PgDb, query: QueryCall): Promise<unknown> {
  // A statement is sent when `execute` is called, before it returns: what the op yields next queues behind it. A query
  // built each time is sent when awaited, a few microtasks later.
  const running: Promise<unknown[]> = query.name === undefined
    ? Promise.resolve(query.build(postgresDialect(db)) as unknown as PromiseLike<unknown[]>)
    : (preparedOn(db, query.name, (pg) => query.build(postgresDialect(pg)) as never).execute(query.values) as Promise<unknown[]>)
  if (query.holdsRun !== undefined) noteRunsLocked(db, [query.holdsRun])
  if (query.answer === 'sent' && query.name !== undefined) return answerBeforeCommit(db, running, query.check)
  const answer = await running
  if (query.answer === 'sent') return query.check?.(answer)
  return query.answer === 'rows' ? answer : query.answer === 'row' ? answer[0] : undefined
}
