/**
 * `trellis backup`'s own thread: `VACUUM INTO` is one synchronous statement that takes seconds to
 * minutes on a large database; run here, on a read-only connection of its own, it leaves the command's event loop
 * free to show the copy's progress (./backup.ts watches the file grow). One backup per worker; the answer is
 * BackupAnswer. An extra entrypoint of the compiled binary (package.json "build"; src/worker-entrypoints.ts).
 */
import { Database } from 'bun:sqlite'

export interface BackupAsk {
  /** The database file, never created here. */
  path: string
  /** The new file, empty or absent. */
  target: string
  /** How long to wait for a lock (the CLI's, ./open.ts). */
  busyTimeoutMs: number
}

export type BackupAnswer = { ok: true } | { ok: false; message: string; code: string | undefined }

declare const self: Worker

self.onmessage = ({ data }: MessageEvent<BackupAsk>) => {
  let answer: BackupAnswer
  try {
    const connection = new Database(data.path, { readonly: true })
    try {
      connection.run(`PRAGMA busy_timeout = ${Math.trunc(data.busyTimeoutMs)}`)
      connection.run('VACUUM INTO ?', [data.target])
    } finally {
      connection.close()
    }
    answer = { ok: true }
  } catch (error) {
    answer = { ok: false, message: (error as Error).message, code: (error as { code?: string }).code }
  }
  postMessage(answer)
}
