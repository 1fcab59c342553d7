/**
 * Text in SQLite's order: SQLite compares text byte by byte (BINARY), PostgreSQL by the database's collation
 * (locale rules) unless told otherwise. A twin that orders by text orders by `byteOrder(column)`, so both databases
 * list names in the same order.
 */
import { type AnyColumn, sql, type SQL } from 'drizzle-orm'

export function byteOrder(column: AnyColumn): SQL {
  return sql`${column} COLLATE "C"`
}
