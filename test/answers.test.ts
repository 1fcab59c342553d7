/**
 * The answers Elysia does not check at run time (`renderedAnswer` schemas: notes, activity and
 * admin logs, runs — built by our renderers from typed rows) are checked here instead, over data of every shape the
 * renderers produce: notes with threads, archived, without a collection; runs queued, waiting, succeeded, failed,
 * cancelled, by token and by session; activity entries of people and of workflow steps; admin entries of the apply
 * file and of changes. Every 2xx body validates against its schema in /openapi.json, and the public lists also
 * against the compatibility document as published (extension values only with `extensions=true`, DESIGN §7).
 * Which routes are unchecked is read from the app: a route marked later without a case here fails the first test.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { ValidateFunction } from 'ajv'
import { Executor } from '../src/executor/executor.ts'
import { UNCHECKED_ANSWER } from '../src/http/schemas.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { createSession } from '../src/modules/auth/sessions.ts'
import { bearer, execute, queryOne, request, runNow, until } from './helpers.ts'
import { acmeWithGlobex, openTaskOnRun, reportHook, userId } from './support/acme.ts'
import { assertValidWithExtensions, validatorFor } from './support/compat-schema.ts'
import { buildFx, type Fx } from './support/logs.ts'
import { deref, type Json, schemaValidator } from './support/openapi-requests.ts'

let fx: Fx & { executor?: Executor }
let doc: Json
let cookie: string
const runIds: string[] = []
/** The ids of production's notes. */
const noteIds: number[] = []
/** Tasks on the waiting run: the first decided with a comment and the form's input, the second left open. */
const taskIds: string[] = []
const compile = schemaValidator()

const NOTES = '/v1/project/Acme/environment/production/notes'
const RUNS = '/v1/project/Acme/environment/production/workflow-runs'

beforeAll(async () => {
  const document = acmeWithGlobex()
  fx = await buildFx({
    document,
    executor: (env) => new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 2, leaseMs: 5_000, pollMs: 20 }),
  })
  const { app, env } = fx
  cookie = `trellis_session=${(await runNow(env.store, createSession(env.clock, userId(env.store, 'alice'), false))).id}`
  const send = async (path: string, init: RequestInit & { json?: unknown } = {}) => {
    const response = await app.handle(request(path, { ...init, headers: { ...bearer(fx.alice), ...(init.headers as Record<string, string>) } }))
    expect(response.status).toBeLessThan(300)
    return (await response.json()) as Json
  }
  // Notes: threads of several messages, one archived, one whose collection is gone (ON DELETE SET NULL).
  for (let i = 0; i < 4; i++) {
    const note = await send(NOTES, { method: 'POST', json: { recordId: `ord_100${i}`, collectionName: i % 2 ? 'customers' : 'orders', teamName: 'Support', title: `Answer ${i}`, content: '<p>first</p>' } })
    await send(`${NOTES}/${note.id}/messages`, { method: 'POST', json: { content: '<p>and <strong>more</strong></p>' } })
    if (i === 1) await send(`${NOTES}/${note.id}`, { method: 'PATCH', json: { archived: true } })
    if (i === 2) execute(env.store, 'UPDATE notes SET collection_id = NULL WHERE id = ?', note.id as number)
  }
  // Runs: waiting (a paid order reaches the `wait` step), succeeded (a pending one ends at the condition), failed
  // (no such record), cancelled and queued (a session's manual runs: no token).
  fx.executor!.start()
  const hook = reportHook(fx.report, 'Refund order')
  for (const record of ['ord_1001', 'ord_1002', 'no_such_order']) {
    runIds.push(((await send(hook, { method: 'POST', json: { record_id: record } })).runId as string))
  }
  const status = (id: string) => (queryOne(env.store, 'SELECT status FROM runs WHERE id = ?', id) as { status: string }).status
  await until('the webhook runs settled', () => runIds.every((id) => ['waiting', 'succeeded', 'failed'].includes(status(id))))
  await fx.executor!.stop()
  const manual = (recordId: string) =>
    app.handle(request(RUNS, { method: 'POST', headers: { cookie, origin: env.config.baseUrl }, json: { teamName: 'Support', workflowName: 'Refund order', recordId } }))
  for (const record of ['ord_1003', 'ord_1004']) runIds.push(((await (await manual(record)).json()) as { runId: string }).runId)
  expect((await app.handle(request(`/v1/workflow-runs/${runIds.at(-1)}/cancel`, { method: 'POST', headers: { cookie, origin: env.config.baseUrl } }))).status).toBe(200)
  expect(runIds.map(status).sort()).toEqual(['cancelled', 'failed', 'queued', 'succeeded', 'waiting'])
  // The console's record page writes `read` entries; a webhook change writes an admin entry.
  await app.handle(request('/p/Acme/e/production/t/Support/c/orders/r/ord_1001', { headers: { cookie } }))
  await send('/v1/project/Acme/environment/production/team/Support/workflows/Refund%20order/webhook', { method: 'PATCH', json: { ratePerMinute: 30 } })
  doc = (await (await app.handle(request('/openapi.json'))).json()) as Json
  noteIds.push(...((await send(`${NOTES}?limit=100`)).data as Json[]).map((n) => n.id as number))
  // Tasks: one decided with a comment and the form's input, one open (with a deadline), on the waiting run.
  const form = JSON.stringify({ type: 'object', properties: { amount: { type: 'number', minimum: 0 } }, required: ['amount'] })
  for (const [stepIndex, dueAt] of [[0, null], [1, env.clock.now() + 86_400_000]] as const) {
    taskIds.push(await openTaskOnRun(env.store, env.clock, runIds[0]!, { stepIndex, stepName: `approve_${stepIndex}`, allowRequester: true, form, dueAt }))
  }
  await send(`/v1/tasks/${taskIds[0]}/decisions`, { method: 'POST', json: { decision: 'approve', comment: 'fine', input: { amount: 5 } } })
}, 30_000)
afterAll(() => fx.env.cleanup())

/** The /openapi.json schema of an operation's answer with `status`. */
function documented(operationId: string, status: string): ValidateFunction {
  for (const methods of Object.values(doc.paths as Json)) {
    for (const operation of Object.values(methods as Json) as Json[]) {
      if (operation.operationId !== operationId) continue
      const schema = operation.responses?.[status]?.content?.['application/json']?.schema
      if (!schema) throw new Error(`${operationId} documents no ${status} body`)
      return compile(deref(schema, doc.components.schemas))
    }
  }
  throw new Error(`no operation ${operationId} in /openapi.json`)
}

async function answer(path: string, init: RequestInit & { json?: unknown } = {}, headers: Record<string, string> = bearer(fx.alice)) {
  const response = await fx.app.handle(request(path, { ...init, headers: { ...headers, ...(init.headers as Record<string, string>) } }))
  return { status: response.status, body: (await response.json()) as Json }
}

function expectValid(validate: ValidateFunction, body: unknown, label: string): void {
  const ok = validate(body)
  if (!ok) console.error(label, JSON.stringify(validate.errors, null, 2), JSON.stringify(body).slice(0, 2000))
  expect({ label, ok }).toEqual({ label, ok: true })
}

/** Each unchecked operation, with the requests whose answers are validated (method, path, status, body?). */
const CASES: Record<string, () => [string, string, string, unknown?][]> = {
  listNotes: () => [
    ['GET', `${NOTES}?limit=100`, '200'],
    ['GET', `${NOTES}?limit=2`, '200'],
    ['GET', '/v1/project/Acme/environment/staging/notes', '200'],
  ],
  getNote: () => noteIds.map((id) => ['GET', `${NOTES}/${id}`, '200'] as [string, string, string]),
  createNote: () => [['POST', NOTES, '201', { recordId: 'ord_1009', collectionName: 'orders', teamName: 'Billing', title: 'New', content: '<p>x</p>' }]],
  addNoteMessage: () => [['POST', `${NOTES}/${noteIds[0]}/messages`, '201', { content: '<p>reply</p>' }]],
  updateNote: () => [['PATCH', `${NOTES}/${noteIds[1]}`, '200', { archived: true, title: 'Put away' }]],
  listActivityLogs: () => [
    ['GET', '/v1/project/Acme/environment/production/activity-logs?limit=100', '200'],
    ['GET', '/v1/project/Acme/environment/production/activity-logs?limit=100&extensions=true', '200'],
  ],
  listAdminLogs: () => [
    ['GET', '/v1/project/Acme/admin-logs?limit=100', '200'],
    ['GET', '/v1/project/Acme/admin-logs?limit=100&extensions=true', '200'],
  ],
  listRuns: () => [
    ['GET', `${RUNS}?limit=100`, '200'],
    ['GET', `${RUNS}?status=waiting`, '200'],
  ],
  getRun: () => runIds.map((id) => ['GET', `/v1/workflow-runs/${id}`, '200'] as [string, string, string]),
  cancelRun: () => [['POST', `/v1/workflow-runs/${runIds[3]}/cancel`, '200']],
  listTasks: () => [
    ['GET', '/v1/project/Acme/environment/production/tasks?limit=100', '200'],
    ['GET', '/v1/project/Acme/environment/production/tasks?status=open', '200'],
  ],
  getTask: () => taskIds.map((id) => ['GET', `/v1/tasks/${id}`, '200'] as [string, string, string]),
  decideTask: () => [['POST', `/v1/tasks/${taskIds[1]}/decisions`, '200', { decision: 'reject', comment: 'no', input: { amount: 1 } }]],
}

const COMPAT: Record<string, 'listNotes' | 'listActivityLogs' | 'listAdminLogs'> = { listNotes: 'listNotes', listActivityLogs: 'listActivityLogs', listAdminLogs: 'listAdminLogs' }

describe('answers Elysia does not check at run time are checked here', () => {
  test('the data covers every shape the renderers produce', async () => {
    const notes = (await answer(`${NOTES}?limit=100`)).body.data as Json[]
    expect(notes.some((n) => n.archivedAt !== undefined)).toBe(true)
    expect(notes.some((n) => n.collection === undefined)).toBe(true)
    expect(notes.some((n) => (n.messages as unknown[]).length > 1)).toBe(true)
    const runs = (await answer(`${RUNS}?limit=100`)).body.data as Json[]
    expect(new Set(runs.map((r) => r.status))).toEqual(new Set(['queued', 'waiting', 'succeeded', 'failed', 'cancelled']))
    expect(runs.some((r) => r.token === null) && runs.some((r) => r.token !== null)).toBe(true)
    expect(runs.some((r) => r.error !== undefined)).toBe(true)
    expect(runs.some((r) => (r.steps as Json[]).some((s) => s.status === 'waiting'))).toBe(true)
    const activity = (await answer('/v1/project/Acme/environment/production/activity-logs?limit=100&extensions=true')).body.data as Json[]
    expect(activity.some((e) => e.workflow !== undefined) && activity.some((e) => e.type === 'read')).toBe(true)
    const admin = (await answer('/v1/project/Acme/admin-logs?limit=100')).body.data as Json[]
    expect(admin.some((e) => e.previousValue !== undefined)).toBe(true)
  })

  test('the unchecked routes are exactly those with a case below', () => {
    const unchecked = fx.app.routes
      .filter((route) => Object.values((route.hooks as { response?: Record<string, Json> }).response ?? {}).some((schema) => schema?.[UNCHECKED_ANSWER] === true))
      .map((route) => (route.hooks as { detail?: { operationId?: string } }).detail?.operationId)
    expect(unchecked.sort()).toEqual(Object.keys(CASES).sort())
  })

  test.each(Object.keys(CASES))('%s: every answer validates against /openapi.json (and the compatibility document)', async (operationId) => {
    for (const [method, path, status, json] of CASES[operationId]!()) {
      const session = operationId === 'cancelRun'
      const sent = await answer(path, { method, json }, session ? { cookie, origin: fx.env.config.baseUrl } : bearer(fx.alice))
      expect({ path, status: sent.status }).toEqual({ path, status: Number(status) })
      expectValid(documented(operationId, status), sent.body, `${method} ${path}`)
      const data = (sent.body.data ?? [sent.body]) as unknown[]
      expect(data.length).toBeGreaterThan(0)
      const compat = COMPAT[operationId]
      if (compat === undefined) continue
      if (compat !== 'listNotes' && path.includes('extensions=true')) expect(assertValidWithExtensions(compat, sent.body, path)).toBeGreaterThan(0)
      else expectValid(validatorFor(compat, 200), sent.body, `${path} (compatibility document)`)
    }
  })

})
