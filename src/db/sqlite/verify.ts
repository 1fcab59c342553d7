/**
 * The checks of a restored copy (`trellis restore`, `trellis backup drill`): the file is a sound SQLite database
 * (`PRAGMA integrity_check`), the migrations apply to it (what `serve` would do on it), what it holds (rows per
 * table), and its newest write — the time of the newest run or activity entry, so an operator knows how much a
 * restore would give back.
 */
import { Database } from 'bun:sqlite'
import { migrate } from './migrate.ts'

export interface RestoredDatabase {
  /** `ok`, or the first problems `integrity_check` found. */
  integrity: string
  /** The migrations this check applied (the copy was older than this binary), in order. */
  migrationsApplied: string[]
  /** Rows per table (Trellis's own; SQLite's and Litestream's bookkeeping left out), by name. */
  rows: Record<string, number>
  /** The newest run's or activity entry's creation time (µs since the epoch); null when it holds neither. */
  newestWriteMicros: number | null
}

/** How many of integrity_check's findings a report quotes. */
const PROBLEMS_SHOWN = 5

/** Checks the database file at `path` (a copy: migrations are applied to it). Throws when it is not a database at all. */
export function verifyRestoredDatabase(path: string): RestoredDatabase {
  const sqlite = new Database(path, { readwrite: true, create: false, strict: true })
  try {
    sqlite.run('PRAGMA foreign_keys = ON')
    const findings = (sqlite.prepare(`PRAGMA integrity_check(${PROBLEMS_SHOWN})`).values() as [string][]).map(([text]) => text)
    const integrity = findings.join('; ')
    if (integrity !== 'ok') return { integrity, migrationsApplied: [], rows: {}, newestWriteMicros: null }
    const migrationsApplied = migrate(sqlite)
    const tables = (
      sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_litestream\\_%' ESCAPE '\\' ORDER BY name").values() as [string][]
    ).map(([name]) => name)
    const rows: Record<string, number> = {}
    for (const table of tables) rows[table] = Number((sqlite.prepare(`SELECT count(*) FROM "${table.replaceAll('"', '""')}"`).values()[0] as [number])[0])
    const [newest] = sqlite.prepare('SELECT max(t) FROM (SELECT max(created_at) AS t FROM runs UNION ALL SELECT max(created_at) FROM activity_logs)').values()[0] as [number | null]
    return { integrity, migrationsApplied, rows, newestWriteMicros: newest === null ? null : Number(newest) }
  } finally {
    sqlite.close()
  }
}
