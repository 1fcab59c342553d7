/**
 * Online backup: `VACUUM INTO` copies the database as one read transaction sees it, so the copy is consistent
 * while other connections (the server, the CLI) keep writing, and it includes what the WAL holds. Never copy
 * the `.db` file itself: recent commits may still be only in the WAL.
 */
import { existsSync, statSync } from 'node:fs'
import type { Progress } from '../../lib/progress.ts'
import type { BackupAnswer, BackupAsk } from './backup-worker.ts'
import { CLI_BUSY_TIMEOUT_MS, type SqliteFile } from './open.ts'

/** How often the backup's progress looks at the size of the file being written (a stat). */
const WATCH_MS = 100

/**
 * Writes a consistent copy of the store's database to `target` (absent or an empty file) on a thread of its own
 * (`entrypoint`: ./backup-worker.ts, its own read-only connection), while `progress` hears of the bytes written
 * so far against the expected size: the pages in use ((page_count − freelist_count) × page_size; `VACUUM INTO`
 * leaves out the free ones).
 */
export async function backupInto(store: SqliteFile, target: string, entrypoint: URL, progress: Progress): Promise<void> {
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
