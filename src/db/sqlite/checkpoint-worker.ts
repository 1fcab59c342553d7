/**
 * The WAL checkpoint's own thread, so that `/healthz` answers within 50 ms under load. Copying the WAL into the
 * database file and syncing it takes tens of milliseconds under a write load; on the event loop that serves requests
 * it would hold every request, the probes included, that long. Here it runs on a connection of its own, in a worker: the
 * server's connection keeps committing meanwhile (SQLite's WAL lets one checkpointer and one writer work at once).
 * ./upkeep.ts starts it and asks for one checkpoint at a time; each answer is a CheckpointResult or the error.
 * An extra entrypoint of the compiled binary (package.json "build"; src/worker-entrypoints.ts).
 */
import { Database } from 'bun:sqlite'
import { type CheckpointMode, checkpointOn } from './wal-checkpoint.ts'

export interface CheckpointAsk {
  path: string
  mode: CheckpointMode
}

export type CheckpointAnswer =
  | { ok: true; result: ReturnType<typeof checkpointOn> }
  | { ok: false; message: string; code: string | undefined }

declare const self: Worker

let connection: Database | null = null

self.onmessage = ({ data }: MessageEvent<CheckpointAsk>) => {
  let answer: CheckpointAnswer
  try {
    if (!connection) {
      // The server's file, never created here; busy_timeout 0: a checkpoint that would wait gives up (busy) at once.
      connection = new Database(data.path, { readwrite: true, create: false })
      connection.run('PRAGMA busy_timeout = 0')
    }
    answer = { ok: true, result: checkpointOn(connection, data.mode) }
  } catch (error) {
    answer = { ok: false, message: (error as Error).message, code: (error as { code?: string }).code }
  }
  postMessage(answer)
}
