/**
 * The dialect context every storage query is written against (docs/architecture.md "Architecture", "One query, two dialects"):
 * the connection's query builder, the tables, and the few fragments that differ between SQLite and PostgreSQL.
 * A query is written once as `(d: Dialect) => query` (./query.ts) and built once per dialect and connection.
 *
 * The builder and tables are typed as SQLite's: Drizzle's pg-core builder has the same methods and answers the same
 * row shapes for everything the queries use (select, join, where, order, limit, insert, upsert, returning, update,
 * delete), and the PostgreSQL pass of the suite runs every query there. A fragment whose SQL differs between the two
 * is a method of the dialect, never a branch in a query.
 */
import type { AnyColumn, SQL } from 'drizzle-orm'
import type { BunSQLiteDatabase } from 'drizzle-orm/bun-sqlite'
import type * as tables from './schema.ts'

/**
 * The lists read at or below a watermark on PostgreSQL (./postgres/list-watermark.ts): their writers commit at once,
 * and a row is read once no row before it can still commit. The runs' and tasks' ids are UUIDs, not drawn positions: a
 * row of theirs is listed once the pass has deleted its row in `runs_unlisted` or `tasks_unlisted`.
 */
export type WatermarkedList = 'run_events' | 'activity_logs' | 'notes' | 'runs' | 'tasks'

export type Tables = typeof tables

/**
 * The query builder every query is written with: typed as SQLite's (the file comment), a connection's or a
 * transaction's. SQLite's store hands its own (./sqlite/dialect.ts); PostgreSQL's, pg-core's under this type.
 */
export type Db = BunSQLiteDatabase<Tables>

/** A query as built by either dialect's builder (typed as SQLite's: the file comment). */
export interface Built {
  all(...args: never[]): unknown
  get(...args: never[]): unknown
  run(...args: never[]): unknown
  prepare(...args: never[]): { all(values?: never): unknown; get(values?: never): unknown; run(values?: never): unknown }
}

/** How a typed field's values compare in a records list (docs/records.md "Listing records"). */
export type RecordValueKind = 'text' | 'number' | 'boolean' | 'datetime'

/** A record field's value in a list query (`Dialect.recordFieldValue`). */
export interface RecordFieldValue {
  /**
   * The value compared (every operator), sorted and indexed; null when the field is absent, null, or (PostgreSQL)
   * not of the kind.
   */
  value: SQL
  /** The stored JSON value is of the kind: a filter matches only such values (TRUE where `value` is null for the others). */
  hasKind: SQL
  /** A filter's value (a placeholder bound to a string, or a number for `number`) as `value` compares it. */
  param(placeholder: SQL): SQL
  /** What a page remembers of its last row to continue after it (`cursorParam` reads it back). */
  cursorKey: SQL
  cursorParam(placeholder: SQL): SQL
}

export interface Dialect {
  readonly name: 'sqlite' | 'postgres'
  /** The connection's query builder (a transaction's, inside one). */
  readonly db: Db
  /** The tables, in this dialect's column types. */
  readonly t: Tables
  /** Text in byte order: SQLite's BINARY collation is the default; PostgreSQL is told `COLLATE "C"`. */
  byteOrder(column: AnyColumn | SQL): SQL
  /**
   * `column IN (the ids of one JSON array placeholder)`: one prepared statement serves any number of ids. PostgreSQL's
   * is `= ANY` of the array the ids make, computed once, each id looked up: as an `IN` over the JSON's elements its
   * planner may join every row of the table to them (a page of 100 runs reading all 200,000).
   */
  inJsonArray(column: AnyColumn | SQL, placeholder: string, type: 'integer' | 'text'): SQL
  /**
   * A CTE's hint that it is planned apart from the query around it (`WITH x AS ${materialized} (…)`): PostgreSQL's
   * `MATERIALIZED`, so that rows read by id are sought by id whatever the statistics say; nothing on SQLite, which
   * flattens a CTE used once into the query and reads a list of ids first anyway (materialized, a notes page cost it
   * about a tenth more).
   */
  materialized: SQL
  /** A number in a row of `valueRows`: SQLite's integers as they are; PostgreSQL's int8 as float8 (the driver answers int8 as text). */
  number(expression: AnyColumn | SQL): SQL
  /** A statement of raw SQL (written with these fragments) answering each row as the array of its values, in column order: no row mapping. */
  valueRows(query: SQL): Built
  /** `column` (a boolean) is false, as a literal: a partial index `WHERE extension = 0` (`= false`) matches it, a placeholder never. */
  isFalse(column: AnyColumn): SQL
  /**
   * The top-level field named by a placeholder of a JSON object held as text, as text: strings as they are, numbers
   * and `true`/`false` as JSON writes them, null for a missing field or JSON null (a record's `field = value` search).
   */
  jsonFieldText(column: AnyColumn | SQL, field: string): SQL
  /**
   * The DDL, one statement, that builds the index of one field of one collection's records (`name`; partial to the
   * collection, `WHERE collection_id = N`): (environment, the field's value as a records list compares it, in the
   * list's order — nulls lowest, ties by id). SQLite's holds `json_extract(data, '$.field')`, which its lists compare
   * whatever the kind, its nulls first and its ties by rowid (the id) by itself. PostgreSQL's holds the value of the
   * kind (./postgres/dialect.ts `recordFieldOfKind`), with planner statistics on that expression (PostgreSQL does not
   * estimate from a partial index's expression: without them, a filter on one field sorted by another read and sorted
   * every match). The field is written into the SQL (an index cannot hold a placeholder; `field` must be an
   * identifier, `[A-Za-z_][A-Za-z0-9_]*`). A query uses the index by repeating the expression (`recordFieldValue`).
   */
  createRecordFieldIndex(name: string, collectionId: number, field: string, kind: RecordValueKind): SQL
  /** The DDL, one statement, that drops what `createRecordFieldIndex` built under `name` (nothing when there is none). */
  dropRecordFieldIndex(name: string): SQL
  /**
   * A record's top-level field as a records list filters and sorts it (`kind`: how its values compare). Text,
   * numbers and booleans compare through the field's index expression on both stores (`createRecordFieldIndex`);
   * date-times compare as instants on both (`julianday`, `timestamptz`), which no index serves.
   */
  recordFieldValue(field: string, kind: RecordValueKind): RecordFieldValue
  /** `expression` in `direction` with nulls lowest (first ascending, last descending): SQLite's own order, told to PostgreSQL. */
  orderNullsLow(expression: AnyColumn | SQL, direction: 'asc' | 'desc'): SQL
  /** Text with its ASCII letters lowercased, nothing else changed (SQLite's `lower`; PostgreSQL's folds every letter). */
  asciiLower(expression: AnyColumn | SQL): SQL
  /** The select, its rows locked against writers until the transaction ends: PostgreSQL's `FOR SHARE`; SQLite's one writer holds them already. */
  forShare<Q>(select: Q): Q
  /** The select, its rows locked against other writers and their locking reads until the transaction ends: PostgreSQL's `FOR UPDATE`; SQLite's one writer holds them already. */
  forUpdate<Q>(select: Q): Q
  /**
   * `id` (a row of `list`) is listed: PostgreSQL's watermarked lists are read at or below their watermark
   * (./postgres/list-watermark.ts), read in the statement's own snapshot; SQLite's are listed once committed.
   */
  listed(list: WatermarkedList, id: SQL): SQL
}

/**
 * `query` as the builder's own prepared statements are made, answering the driver's value arrays unmapped (Drizzle's
 * `customResultMapper`, as its relational queries use): `valueRows` of either dialect, `name` naming PostgreSQL's.
 */
/** A field name safe to write into SQL as it is (see `createRecordFieldIndex`). */
export function identifierField(field: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(field)) throw new Error(`not a field identifier: ${JSON.stringify(field)}`)
  return field
}

export function valueRowsOf(db: Db, query: SQL, answer: (rows: unknown[][]) => unknown[][]): Built {
  const { session, dialect } = db as unknown as {
    session: { prepareQuery(query: unknown, fields: undefined, name: string, arrays: true, mapper: typeof answer): ReturnType<Built['prepare']> }
    dialect: { sqlToQuery(query: SQL): unknown }
  }
  // The third argument: PostgreSQL's statement name; SQLite's session takes its execute method there ('all').
  const prepare = (name = 'all') => session.prepareQuery(dialect.sqlToQuery(query), undefined, name, true, answer)
  return { prepare, all: () => prepare().all(), get: () => prepare().get(), run: () => prepare().run() }
}
