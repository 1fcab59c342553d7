/** The rows of PostgreSQL's raw render statements (the twins of the SQLite render functions of notes and logs). */
import { clientOf, type PgDb } from './store.ts'

/**
 * The rows of a raw render statement as arrays of values, in its column order (the SQLite render functions shape
 * such arrays; their twins select the same columns, int8 cast to float8 so they arrive as numbers).
 */
export async function valuesOf<Row extends unknown[]>(db: PgDb, text: string, values: unknown[]): Promise<Row[]> {
  return [...((await clientOf(db).unsafe(text, values as never[]).values()) as Row[])]
}
