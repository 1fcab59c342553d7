/**
 * The SQLite dialect of the storage queries (../dialect.ts, ../query.ts): the queries built with Drizzle's SQLite
 * builder over ../schema.ts's tables, and run at once on the connection. PostgreSQL's: ../postgres/dialect.ts.
 */
import { type AnyColumn, type SQL, sql } from 'drizzle-orm'
import { type Db, type Dialect, identifierField, type RecordFieldValue, type RecordValueKind, valueRowsOf } from '../dialect.ts'
import type { QueryCall } from '../op.ts'
import * as tables from '../schema.ts'
import { prepared } from './prepared.ts'

/** A record's top-level field as SQLite's field index holds it and its lists compare it (any kind). */
const extracted = (field: string) => `json_extract(data, '$.${identifierField(field)}')`

const sqliteFragments: Omit<Dialect, 'db' | 'valueRows'> = {
  name: 'sqlite',
  t: tables,
  byteOrder: (column: AnyColumn | SQL) => sql`${column}`,
  inJsonArray: (column: AnyColumn | SQL, placeholder: string) => sql`${column} IN (SELECT value FROM json_each(${sql.placeholder(placeholder)}))`,
  materialized: sql.raw(''),
  number: (expression: AnyColumn | SQL) => sql`${expression}`,
  isFalse: (column: AnyColumn) => sql`${column} = 0`,
  // json_extract answers true/false as 1/0: json_type tells them apart. The field is a quoted label (`$."a.b"`).
  jsonFieldText: (column: AnyColumn | SQL, field: string) => {
    const path = sql`'$.' || json_quote(${sql.placeholder(field)})`
    return sql`(CASE json_type(${column}, ${path}) WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' WHEN 'null' THEN NULL ELSE CAST(json_extract(${column}, ${path}) AS TEXT) END)`
  },
  createRecordFieldIndex: (name: string, collectionId: number, field: string) =>
    sql.raw(`CREATE INDEX IF NOT EXISTS "${name}" ON records (environment_id, ${extracted(field)}) WHERE collection_id = ${Math.trunc(collectionId)}`),
  dropRecordFieldIndex: (name: string) => sql.raw(`DROP INDEX IF EXISTS "${name}"`),
  recordFieldValue: (field: string, kind: RecordValueKind): RecordFieldValue => {
    const value = sql.raw(extracted(field))
    const jsonType = sql.raw(`json_type(data, '$.${identifierField(field)}')`)
    const same = { param: (p: SQL) => p, cursorParam: (p: SQL) => p }
    switch (kind) {
      case 'text': return { value, hasKind: sql`${jsonType} = 'text'`, cursorKey: value, ...same }
      case 'number': return { value, hasKind: sql`${jsonType} IN ('integer', 'real')`, cursorKey: value, ...same }
      // json_extract answers true/false as 1/0; a filter's value is the text true or false.
      case 'boolean': return { value, hasKind: sql`${jsonType} IN ('true', 'false')`, cursorKey: value, ...same, param: (p: SQL) => sql`(${p} = 'true')` }
      case 'datetime': {
        // SQLite's date functions roll an impossible day over (Feb 30 → Mar 2): such text is no instant here, as on
        // PostgreSQL, where its cast fails.
        const instant = sql`(CASE WHEN date(substr(${value}, 1, 10)) = substr(${value}, 1, 10) THEN julianday(${value}) END)`
        return { value: instant, hasKind: sql`${jsonType} = 'text'`, cursorKey: instant, param: (p: SQL) => sql`julianday(${p})`, cursorParam: (p: SQL) => p }
      }
    }
  },
  orderNullsLow: (expression: AnyColumn | SQL, direction: 'asc' | 'desc') => sql`${expression} ${sql.raw(direction)}`,
  asciiLower: (expression: AnyColumn | SQL) => sql`lower(${expression})`,
  forShare: <Q>(select: Q) => select,
  forUpdate: <Q>(select: Q) => select,
  listed: () => sql`1 = 1`,
}

/** The SQLite dialect over this handle (a connection, or a transaction on it). */
export function sqliteDialect(db: Db): Dialect {
  return { ...sqliteFragments, db, valueRows: (query) => valueRowsOf(db, query, (rows) => rows) }
}

/** SQLite's runner of a query written once: built in the SQLite dialect (a statement once per connection) and run at once. */
export function runQuery(db: Db, query: QueryCall): unknown {
  if (query.name !== undefined) {
    const statement = prepared(db, query.name, () => query.build(sqliteDialect(db)).prepare())
    const values = query.values as never
    if (query.check !== undefined) return void query.check(statement.all(values) as unknown[])
    return query.answer === 'rows' ? statement.all(values) : query.answer === 'row' ? statement.get(values) : void statement.run(values)
  }
  const built = query.build(sqliteDialect(db))
  if (query.check !== undefined) return void query.check(built.all() as unknown[])
  return query.answer === 'rows' ? built.all() : query.answer === 'row' ? built.get() : void built.run()
}
