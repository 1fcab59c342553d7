/**
 * Online backup: `VACUUM INTO` copies the database as one read transaction sees it, so the copy is consistent
 * while other connections (the server, the CLI) keep writing, and it includes what the WAL holds. Never copy
 * the `.db` file itself: recent commits may still be only in the WAL.
 */
import { existsSync, statSync } from 'node:fs'
import type { Progress } from '../lib/progress.ts'
import type { DatabaseSettings } from './connect.ts'
import { CLI_BUSY_TIMEOUT_MS, type SqliteStore } from './open.ts'
import type { BackupAnswer, BackupAsk } from './sqlite/backup-worker.ts'

/**
 * How to back up the configured database when `trellis backup` cannot copy it (`backupInto` copies the SQLite file):
 * a PostgreSQL database is backed up with PostgreSQL's own tools. Null for the SQLite file.
 */
export function backupElsewhere(config: DatabaseSettings): string | null {
  if (config.databaseUrl === null) return null
  return [
    'the database is PostgreSQL (--database-url / TRELLIS_DATABASE_URL): back it up with PostgreSQL\'s own tools, e.g.',
    '  pg_dump --format=custom --file trellis.dump "$TRELLIS_DATABASE_URL"   (restore: pg_restore --dbname URL trellis.dump)',
    'or continuous archiving / a replica (docs/scaling-out.md "Scaling out"). Keep TRELLIS_SECRET with it: webhook URLs depend on it.',
  ].join('\n')
}

/** How often the backup's progress looks at the size of the file being written (a stat). */
const WATCH_MS = 100

/**
 * Writes a consistent copy of the store's database to `target` (absent or an empty file) on a thread of its own
 * (`entrypoint`: ./sqlite/backup-worker.ts, its own read-only connection), while `progress` hears of the bytes written
 * so far against the expected size: the pages in use ((page_count − freelist_count) × page_size; `VACUUM INTO`
 * leaves out the free ones).
 */
export async function backupInto(store: SqliteStore, target: string, entrypoint: URL, progress: Progress): Promise<void> {
  const pragma = (name: string) => (store.sqlite.prepare(`PRAGMA ${name}`).values()[0]![0] as number)
  const step = progress.step('backup', (pragma('page_count') - pragma('freelist_count')) * pragma('page_size'))
  const written = () => (existsSync(target) ? statSync(target).size : 0)
  const watch = setInterval(() => step.update(written()), WATCH_MS)
  const worker = new Worker(entrypoint)
  try {
    const answer = await new Promise<BackupAnswer>((resolve, reject) => {
      worker.onmessage = ({ data }: MessageEvent<BackupAnswer>) => resolve(data)
      worker.onerror = (event) => reject(new Error(`backup thread: ${event.message}`))
      worker.addEventListener('close', () => reject(new Error('backup thread: ended without an answer')))
      worker.postMessage({ path: store.path, target, busyTimeoutMs: CLI_BUSY_TIMEOUT_MS } satisfies BackupAsk)
    })
    if (!answer.ok) throw Object.assign(new Error(answer.message), { code: answer.code })
  } finally {
    clearInterval(watch)
    worker.terminate()
  }
  step.done(written())
}
