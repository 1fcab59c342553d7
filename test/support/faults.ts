/**
 * What the fault tests share (test/storage-faults.test.ts, test/faults.test.ts, test/faults-postgres.test.ts): the
 * Acme seed with a parking workflow, the requests they send, the run they watch, and the check that an answer during
 * a fault is one of the documented ones.
 */
import { expect } from 'bun:test'
import { dirname } from 'node:path'
import { migrate } from '../../src/db/sqlite/migrate.ts'
import { openStore, type SqliteStore } from '../../src/db/sqlite/store.ts'
import { systemClock } from '../../src/lib/clock.ts'
import { loadInstanceSecret } from '../../src/lib/secret.ts'
import { bearer, type ServeProcess, startServe, tempDir, until } from '../helpers.ts'
import { acmeDocument, acmeProject, applyAcme, ordersWorkflow, reportHook, tokenFor } from './acme.ts'

export const NOTES = '/v1/project/Acme/environment/production/notes'

/** Sends a request to a real server (`fetch`) or to the app in this process (`app.handle`). */
export type Send = (path: string, init?: RequestInit) => Promise<Response>

/** The `Pause` workflow: load, park for `waitSeconds`, then update its record. */
export const pauseWorkflow = (waitSeconds: number) =>
  ordersWorkflow('Pause', [
    { type: 'load' },
    { type: 'wait', name: 'pause', seconds: waitSeconds },
    { type: 'update', name: 'after', set: { trail: 'resumed' } },
  ])

/** Acme with `Pause` on a SQLite data directory; a token of alice (admin, in Support) for notes and runs. */
export async function seedPause(store: SqliteStore, waitSeconds: number) {
  const document = acmeDocument()
  acmeProject(document).workflows!.push(pauseWorkflow(waitSeconds))
  const report = await applyAcme({ store, clock: systemClock, secret: loadInstanceSecret(dirname(store.path)), baseUrl: 'http://127.0.0.1' }, document)
  const token = (await tokenFor(store, systemClock, 'alice', ['notes:read', 'notes:write', 'workflows:trigger'])).value
  return { hook: reportHook(report, 'Pause'), token }
}

/** Where a test registers what to undo after it (run in reverse order). */
export type Cleanups = (() => void | Promise<void>)[]

/**
 * A real `trellis serve` (log level warn) on a SQLite data directory — `dataDir`, or a fresh temp dir — migrated and
 * seeded with `seedPause(…, 1)` beforehand; killed and removed by `cleanups`. Its webhook, alice's token and `send`.
 */
export async function servePause(cleanups: Cleanups, options: { dataDir?: string; env?: Record<string, string> } = {}) {
  let dataDir = options.dataDir
  if (!dataDir) {
    const data = tempDir('trellis-faults-data-')
    cleanups.push(data.cleanup)
    dataDir = data.path
  }
  const cwd = tempDir('trellis-faults-cwd-')
  cleanups.push(cwd.cleanup)
  const store = openStore(dataDir)
  migrate(store.sqlite)
  const seeded = await seedPause(store, 1)
  store.close()
  const server: ServeProcess = await startServe({ dataDir, cwd: cwd.path, env: { TRELLIS_LOG_LEVEL: 'warn', ...options.env } })
  cleanups.push(async () => void (await server.stop('SIGKILL')))
  const send: Send = (path, init) => fetch(`${server.url}${path}`, init)
  return { ...seeded, server, send, dataDir }
}

export function noteRequest(token: string, title: string, content = '<p>x</p>'): RequestInit {
  return {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ recordId: 'ord_1001', collectionName: 'orders', teamName: 'Support', title, content }),
  }
}

export function triggerRequest(token: string, recordId: string): RequestInit {
  return { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ record_id: recordId }) }
}

export async function runStatus(send: Send, token: string, runId: string): Promise<string> {
  const body = (await (await send(`/v1/workflow-runs/${runId}`, { headers: bearer(token) })).json()) as { status: string }
  return body.status
}

/** Triggers `hook` on `recordId` (202 expected); the run's id. */
export async function startRun(send: Send, hook: string, token: string, recordId = 'ord_1001'): Promise<string> {
  const response = await send(hook, triggerRequest(token, recordId))
  expect(response.status).toBe(202)
  return ((await response.json()) as { runId: string }).runId
}

/** Waits until the run has ended; its final status. */
export function runEnded(send: Send, token: string, runId: string, timeoutMs = 10_000): Promise<string> {
  return until(`run ${runId} to end`, async () => {
    const status = await runStatus(send, token, runId)
    return status === 'succeeded' || status === 'failed' || status === 'cancelled' ? status : null
  }, timeoutMs)
}

/**
 * A storage fault's answer: 503 with `code`, the error body (`error`, `code`, `message`, `retry_after`) and
 * `Retry-After` carrying the same seconds.
 */
export async function expectStorageFault(response: Response, code: string, retryAfter: number): Promise<void> {
  expect(response.status).toBe(503)
  expect(response.headers.get('retry-after')).toBe(String(retryAfter))
  expect(await response.json()).toEqual({ error: 'Service Unavailable', code, message: expect.any(String), retry_after: retryAfter })
}
