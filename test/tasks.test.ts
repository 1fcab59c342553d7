/**
 * Task steps and tasks through the real app (app.handle) with the executor running, on the test store (SQLite, or
 * PostgreSQL with TRELLIS_TEST_STORE=postgres, where the races run against two instances on one database).
 * Acme's Billing team (carol: admin, dave: user) approves refunds of Support's workflows that bob (editor) starts;
 * twenty more users in an Approvers team race on one task. Covers the quorum, the form (at publish time and per
 * decision, naming the field), the self-approval ban, who sees and who may decide, every onReject outcome, cancel and
 * retry, the events and activity entries, each endpoint's refusals, and the database's rules under real concurrency.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Executor } from '../src/executor/executor.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { anotherStore, queryAll, queryOne, request, testApp, type TestEnv, testEnv, type TestStore, until } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, ordersWorkflow, tokenFor, UUID } from './support/acme.ts'

const NO_API_LIMIT = { TRELLIS_API_RATE_PER_MIN: '1000000', TRELLIS_API_RATE_PER_HOUR: '1000000', TRELLIS_API_RATE_PER_DAY: '1000000' }
const PRODUCTION = '/v1/project/Acme/environment/production'
const RACERS = Array.from({ length: 20 }, (_, i) => `racer${String(i + 1).padStart(2, '0')}`)

const form = {
  type: 'object',
  title: 'Refund',
  properties: {
    amount: { type: 'number', minimum: 0, maximum: 500, title: 'Amount to refund' },
    reason: { type: 'string', enum: ['damaged', 'late', 'other'] },
  },
  required: ['amount'],
}
const approveStep = (extra: Record<string, unknown> = {}) => ({ type: 'task', name: 'approve', title: 'Refund {{record.amount}} on {{record.id}}?', assignees: { teams: ['Billing'] }, ...extra })
const stamp = { type: 'update', name: 'stamp', set: { decision: '{{tasks.approve.decision}}', refunded: '{{tasks.approve.input.amount}}', by: '{{tasks.approve.decidedBy}}' } }

let env: TestEnv
let executor: Executor
let app: ReturnType<typeof testApp>
/** A second instance on the same database (PostgreSQL), for the races; the first again on SQLite. */
let other: ReturnType<typeof testApp>
let otherStore: TestStore | null = null
const tokens: Record<string, string> = {}

beforeAll(async () => {
  env = testEnv(NO_API_LIMIT)
  const document = acmeDocument()
  const acme = acmeProject(document)
  for (const name of RACERS) {
    document.users.push({ email: `${name}@example.com`, username: name })
    acme.members!.push({ user: `${name}@example.com`, role: 'user' })
  }
  acme.teams!.push({ name: 'Approvers', members: RACERS.map((name) => `${name}@example.com`) })
  for (let i = 1; i <= 30; i++) acme.records!.push({ environment: 'production', collection: 'orders', id: `t-${i}`, data: { amount: 100 + i } })
  acme.workflows!.push(
    ordersWorkflow('Refund with approval', [{ type: 'load' }, approveStep({ approvals: 2, form }), stamp]),
    ordersWorkflow('Reject fails', [approveStep(), stamp]),
    ordersWorkflow('Reject ends', [approveStep({ onReject: 'end' }), stamp]),
    ordersWorkflow('Reject continues', [
      approveStep({ onReject: 'continue' }),
      { type: 'condition', name: 'approved', if: { field: 'tasks.approve.decision', equals: 'rejected' }, else: 'fail' },
      stamp,
    ]),
    ordersWorkflow('Ask bob', [approveStep({ assignees: { users: ['bob@example.com'] } })]),
    ordersWorkflow('Ask Support', [approveStep({ assignees: { teams: ['Support'] } })]),
    ordersWorkflow('Bob may approve his own', [approveStep({ assignees: { users: ['bob@example.com'] }, allowRequester: true })]),
    ordersWorkflow('Race', [approveStep({ assignees: { teams: ['Approvers'] }, approvals: 2 })]),
    ordersWorkflow('Ask racer19', [approveStep({ assignees: { users: ['racer19@example.com'] } })]),
    ordersWorkflow('Ask racer19 and Approvers', [approveStep({ assignees: { teams: ['Approvers'], users: ['racer19@example.com'] } })]),
  )
  await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  executor = new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 4, leaseMs: 5_000, pollMs: 20 })
  app = testApp(env, { clock: systemClock, executor })
  if (env.store.kind === 'postgres') {
    otherStore = anotherStore(env)
    other = testApp({ ...env, store: otherStore }, { clock: systemClock })
  } else other = app
  executor.start()
  const all = ['workflows:trigger', 'tasks:read', 'tasks:write'] as const
  for (const name of ['alice', 'bob', 'carol', 'dave']) tokens[name] = (await tokenFor(env.store, systemClock, name, [...all])).value
  tokens.daveRead = (await tokenFor(env.store, systemClock, 'dave', ['tasks:read'])).value
  tokens.daveTrigger = (await tokenFor(env.store, systemClock, 'dave', ['workflows:trigger'])).value
  tokens.aliceAll = (await tokenFor(env.store, systemClock, 'alice', ['all'])).value
  for (const name of RACERS) tokens[name] = (await tokenFor(env.store, systemClock, name, ['tasks:read', 'tasks:write'])).value
}, 60_000)

afterAll(async () => {
  await executor.stop(2_000)
  await otherStore?.close()
  env.cleanup()
})

interface Sent {
  status: number
  headers: Headers
  body: Record<string, unknown>
}

async function call(path: string, token: string, init: { method?: string; json?: unknown; headers?: Record<string, string>; via?: typeof app } = {}): Promise<Sent> {
  const response = await (init.via ?? app).handle(request(path, { method: init.method ?? 'GET', json: init.json, headers: { authorization: `Bearer ${token}`, ...init.headers } }))
  const text = await response.text()
  return { status: response.status, headers: response.headers, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} }
}

interface TaskBody {
  id: string
  status: string
  step: string
  title: string
  run: { id: string; workflow: { name: string; version: number } }
  recordId: string
  approvalsRequired: number
  approvals: number
  decisions: { user: { username: string }; decision: string; comment: string | null; input: unknown }[]
  assignees: { teams: string[]; users: { username: string }[] }
  form: unknown
  closedAt: string | null
}

async function start(workflowName: string, recordId: string, token = tokens.bob!): Promise<string> {
  const sent = await call(`${PRODUCTION}/workflow-runs`, token, { method: 'POST', json: { workflowName, teamName: 'Support', recordId } })
  expect(sent.status).toBe(202)
  return sent.body.runId as string
}

const getRun = async (id: string) => (await call(`/v1/workflow-runs/${id}`, tokens.alice!)).body as { status: string; error?: { code: string; step?: string }; steps: { name: string; status: string; output?: unknown }[] }

/** The run's status once it reaches one of `statuses`. */
const runReaches = (id: string, ...statuses: string[]) => until(`run ${id} ${statuses.join('/')}`, async () => ((run) => statuses.includes(run.status) && run)(await getRun(id)))

/** The open task of the run, once its step has opened it (read by an admin). */
async function openTaskOf(runId: string): Promise<TaskBody> {
  await runReaches(runId, 'waiting')
  const id = (queryOne<{ id: string }>(env.store, 'SELECT id FROM tasks WHERE run_id = ? AND status = ?', runId, 'open'))?.id
  if (!id) throw new Error(`run ${runId} waits on no open task`)
  return (await call(`/v1/tasks/${id}`, tokens.alice!)).body as unknown as TaskBody
}

const decide = (taskId: string, token: string, json: unknown, init: { headers?: Record<string, string>; via?: typeof app } = {}) =>
  call(`/v1/tasks/${taskId}/decisions`, token, { method: 'POST', json, ...init })

const recordData = (id: string) => JSON.parse(queryOne<{ data: string }>(env.store, 'SELECT data FROM records WHERE record_key = ?', id)!.data) as Record<string, unknown>

describe('a task step', () => {
  test('parks the run, takes two distinct approvals with a valid form, and the run goes on with what was entered', async () => {
    const runId = await start('Refund with approval', 't-1')
    const task = await openTaskOf(runId)
    expect(task).toMatchObject({ status: 'open', step: 'approve', title: 'Refund 101 on t-1?', recordId: 't-1', approvalsRequired: 2, approvals: 0, assignees: { teams: ['Billing'], users: [] }, form })
    expect(task.id).toMatch(UUID)
    expect(task.run).toMatchObject({ id: runId, workflow: { name: 'Refund with approval', version: 1 } })

    // The form names the field it refuses (a JSON pointer); nothing is recorded.
    for (const [input, field] of [[{ amount: 900 }, '/amount'], [{}, '/amount'], [{ amount: 5, reason: 'bored' }, '/reason'], [{ amount: 5, extra: 1 }, '/extra']] as const) {
      const refused = await decide(task.id, tokens.dave!, { decision: 'approve', input })
      expect({ status: refused.status, code: refused.body.code, field: (refused.body.details as { field: string }[])[0]!.field }).toEqual({ status: 422, code: 'invalid_input', field })
      expect(refused.body.message as string).toContain(field)
    }
    // bob asked (he started the run) but is not an assignee.
    expect((await decide(task.id, tokens.bob!, { decision: 'approve', input: { amount: 1 } })).body.code).toBe('not_an_assignee')

    const first = await decide(task.id, tokens.dave!, { decision: 'approve', comment: 'ok by me', input: { amount: 100, reason: 'late' } })
    expect(first.status).toBe(200)
    expect(first.body).toMatchObject({ status: 'open', approvals: 1 })
    const again = await decide(task.id, tokens.dave!, { decision: 'approve', input: { amount: 100 } })
    expect({ status: again.status, code: again.body.code }).toEqual({ status: 409, code: 'already_decided' })
    expect((await getRun(runId)).status).toBe('waiting')

    const second = await decide(task.id, tokens.carol!, { decision: 'approve', input: { amount: 120, reason: 'damaged' } })
    expect(second.status).toBe(200)
    expect(second.body).toMatchObject({ status: 'approved', approvals: 2 })
    expect((second.body as unknown as TaskBody).decisions.map((d) => [d.user.username, d.decision, d.comment])).toEqual([['dave', 'approve', 'ok by me'], ['carol', 'approve', null]])

    expect((await runReaches(runId, 'succeeded', 'failed')).status).toBe('succeeded')
    expect(recordData('t-1')).toMatchObject({ decision: 'approved', refunded: '120', by: 'dave@example.com,carol@example.com' })
    const late = await decide(task.id, tokens.aliceAll!, { decision: 'reject' })
    expect({ status: late.status, code: late.body.code, taskStatus: late.body.status }).toEqual({ status: 409, code: 'task_closed', taskStatus: 'approved' })

    // The run's events tell the task's life; the activity log its opening, each decision and its closing, with who.
    const events = queryAll<{ type: string }>(env.store, 'SELECT type FROM run_events WHERE run_id = ? ORDER BY id', runId).map((e) => e.type)
    expect(events).toEqual(['run.started', 'step.succeeded', 'task.opened', 'step.waiting', 'task.decided', 'task.decided', 'task.closed', 'run.resumed', 'step.succeeded', 'step.succeeded', 'run.succeeded'])
    const log = await call(`${PRODUCTION}/activity-logs?recordId=t-1&extensions=true&limit=20`, tokens.aliceAll!)
    const entries = (log.body.data as { action: string; label: string; user: { username: string } }[]).reverse().filter((e) => e.action.includes('Approval') || e.action === 'closeTask')
    expect(entries.map((e) => [e.action, e.user.username])).toEqual([['createApproval', 'bob'], ['approveApproval', 'dave'], ['approveApproval', 'carol'], ['closeTask', 'carol']])
    expect(entries[1]!.label).toContain('ok by me')
  })

  test('the run\'s user may not decide it (admins included) unless the step allows it', async () => {
    const bobs = await openTaskOf(await start('Ask bob', 't-2'))
    expect((await decide(bobs.id, tokens.bob!, { decision: 'approve' })).body.code).toBe('requester_cannot_decide')
    const alices = await openTaskOf(await start('Ask Support', 't-3', tokens.alice))
    expect((await decide(alices.id, tokens.alice!, { decision: 'approve' })).body.code).toBe('requester_cannot_decide')
    expect((await decide(alices.id, tokens.bob!, { decision: 'approve' })).status).toBe(200)
    const allowed = await openTaskOf(await start('Bob may approve his own', 't-4'))
    expect((await decide(allowed.id, tokens.bob!, { decision: 'approve' })).body.status).toBe('approved')
  })

  test('a rejection fails the run (task_rejected), and a retry asks again with a new task', async () => {
    const runId = await start('Reject fails', 't-5')
    const task = await openTaskOf(runId)
    const rejected = await decide(task.id, tokens.dave!, { decision: 'reject', comment: 'no receipt' })
    expect(rejected.body).toMatchObject({ status: 'rejected' })
    const failed = await runReaches(runId, 'failed', 'succeeded')
    expect(failed.error).toMatchObject({ code: 'task_rejected', step: 'approve' })
    const retried = await call(`/v1/workflow-runs/${runId}/retry`, tokens.bob!, { method: 'POST' })
    expect(retried.status).toBe(202)
    const again = await openTaskOf(retried.body.runId as string)
    expect(again.id).not.toBe(task.id)
    expect((await decide(again.id, tokens.dave!, { decision: 'approve' })).body.status).toBe('approved')
    expect((await runReaches(retried.body.runId as string, 'succeeded', 'failed')).status).toBe('succeeded')
    expect(recordData('t-5')).toMatchObject({ decision: 'approved', by: 'dave@example.com' })
  })

  test('onReject end ends the run there; onReject continue goes on with the rejection to read', async () => {
    const ends = await start('Reject ends', 't-6')
    await decide((await openTaskOf(ends)).id, tokens.carol!, { decision: 'reject' })
    const ended = await runReaches(ends, 'succeeded', 'failed')
    expect(ended.status).toBe('succeeded')
    expect(ended.steps.map((s) => s.name)).toEqual(['approve'])
    expect(recordData('t-6').decision).toBeUndefined()
    const goesOn = await start('Reject continues', 't-7')
    await decide((await openTaskOf(goesOn)).id, tokens.carol!, { decision: 'reject' })
    expect((await runReaches(goesOn, 'succeeded', 'failed')).status).toBe('succeeded')
    expect(recordData('t-7')).toMatchObject({ decision: 'rejected', refunded: '', by: 'carol@example.com' })
  })

  test('cancelling the run cancels its open task: a decision then is 409 task_closed', async () => {
    const runId = await start('Reject fails', 't-8')
    const task = await openTaskOf(runId)
    expect((await call(`/v1/workflow-runs/${runId}/cancel`, tokens.bob!, { method: 'POST' })).status).toBe(200)
    const read = await call(`/v1/tasks/${task.id}`, tokens.dave!)
    expect(read.body).toMatchObject({ status: 'cancelled' })
    expect((read.body as unknown as TaskBody).closedAt).not.toBeNull()
    const refused = await decide(task.id, tokens.dave!, { decision: 'approve' })
    expect({ status: refused.status, code: refused.body.code, taskStatus: refused.body.status }).toEqual({ status: 409, code: 'task_closed', taskStatus: 'cancelled' })
    const events = queryAll<{ type: string; status: string }>(env.store, 'SELECT type, status FROM run_events WHERE run_id = ? ORDER BY id', runId)
    expect(events.slice(-2)).toEqual([{ type: 'task.closed', status: 'cancelled' }, { type: 'run.cancelled', status: 'cancelled' }])
  })
})

describe('who sees a task', () => {
  let billingTask: TaskBody
  beforeAll(async () => {
    billingTask = await openTaskOf(await start('Reject fails', 't-9'))
  })
  const ids = async (token: string, query = '') => ((await call(`${PRODUCTION}/tasks?limit=100${query}`, token)).body.data as TaskBody[]).map((t) => t.id)

  test('admins see every task, members the tasks assigned to them or their teams and those of runs they started; others get 404', async () => {
    expect(await ids(tokens.alice!)).toContain(billingTask.id)
    expect(await ids(tokens.dave!)).toContain(billingTask.id)
    expect(await ids(tokens.bob!)).toContain(billingTask.id)
    expect(await ids(tokens.racer01!)).not.toContain(billingTask.id)
    expect((await call(`/v1/tasks/${billingTask.id}`, tokens.racer01!)).status).toBe(404)
    expect((await decide(billingTask.id, tokens.racer01!, { decision: 'approve' })).status).toBe(404)
  })

  test('assignee=me lists the open tasks the caller may decide now', async () => {
    expect(await ids(tokens.dave!, '&assignee=me')).toContain(billingTask.id)
    expect(await ids(tokens.alice!, '&assignee=me')).toContain(billingTask.id)
    expect(await ids(tokens.bob!, '&assignee=me')).not.toContain(billingTask.id)
    expect(await ids(tokens.carol!, '&assignee=me&status=open&workflowName=Reject%20fails&teamName=Support&recordId=t-9')).toEqual([billingTask.id])
    expect(await ids(tokens.carol!, '&teamName=Nobody')).toEqual([])
  })

  test('assignee=me of a member: the tasks naming them, their team or both, each once, newest first, paged alike', async () => {
    const opened: string[] = []
    for (const [i, name] of ['Race', 'Ask racer19', 'Ask racer19 and Approvers', 'Race', 'Ask racer19'].entries()) opened.push((await openTaskOf(await start(name, `t-${21 + i}`))).id)
    const me = queryOne<{ id: number }>(env.store, 'SELECT id FROM users WHERE email = ?', 'racer19@example.com')!.id
    // What the walks of the member's assignments must find, written as one plain query.
    const expected = queryAll<{ id: string }>(
      env.store,
      `SELECT k.id FROM tasks k JOIN environments e ON e.id = k.environment_id
      WHERE e.name = 'production' AND k.status = 'open' AND (k.allow_requester OR k.requester_id <> ?)
        AND EXISTS (SELECT 1 FROM task_assignees a WHERE a.task_id = k.id AND (a.user_id = ? OR a.team_id IN (SELECT team_id FROM team_members WHERE user_id = ?)))
        AND NOT EXISTS (SELECT 1 FROM task_decisions x WHERE x.task_id = k.id AND x.user_id = ?)
      ORDER BY k.created_at DESC`,
      me, me, me, me,
    ).map((row) => row.id)
    const mine = await ids(tokens.racer19!, '&assignee=me')
    expect(mine).toEqual(expected)
    expect(mine.filter((id) => opened.includes(id))).toEqual([...opened].reverse())
    const paged: string[] = []
    for (let query = '&assignee=me&limit=2'; ; ) {
      const page = await call(`${PRODUCTION}/tasks?${query.slice(1)}`, tokens.racer19!)
      const data = page.body.data as { id: string; createdAt: string }[]
      paged.push(...data.map((t) => t.id))
      if (!page.body.hasMore) break
      query = `&assignee=me&limit=2&createdAt.lt=${encodeURIComponent(data.at(-1)!.createdAt)}`
    }
    expect(paged).toEqual(mine)
  })

  test('pages newest first by createdAt.lt, in the notes envelope', async () => {
    const first = await call(`${PRODUCTION}/tasks?limit=2`, tokens.alice!)
    expect(first.body).toMatchObject({ hasMore: true, parameters: { projectName: 'Acme', environmentName: 'production', limit: 2 } })
    const page = first.body.data as { id: string; createdAt: string }[]
    const next = await call(`${PRODUCTION}/tasks?limit=100&createdAt.lt=${encodeURIComponent(page[1]!.createdAt)}`, tokens.alice!)
    const all = await ids(tokens.alice!)
    expect([...page.map((t) => t.id), ...(next.body.data as { id: string }[]).map((t) => t.id)]).toEqual(all)
  })
})

describe('each endpoint refuses bad input and missing rights', () => {
  test('list, read and decide', async () => {
    const task = await openTaskOf(await start('Reject fails', 't-10'))
    const cases: [Promise<Sent>, number, string][] = [
      [call(`${PRODUCTION}/tasks?limit=0`, tokens.alice!), 400, 'invalid_parameter'],
      [call(`${PRODUCTION}/tasks?status=pending`, tokens.alice!), 400, 'invalid_parameter'],
      [call(`${PRODUCTION}/tasks?assignee=you`, tokens.alice!), 400, 'invalid_parameter'],
      [call(`${PRODUCTION}/tasks?createdAt.lt=yesterday`, tokens.alice!), 400, 'invalid_parameter'],
      [call('/v1/project/Acme/environment/nowhere/tasks', tokens.alice!), 404, 'not_found'],
      [call(`${PRODUCTION}/tasks`, tokens.daveTrigger!), 403, 'insufficient_scope'],
      [call('/v1/tasks/not-a-uuid', tokens.alice!), 400, 'invalid_parameter'],
      [call('/v1/tasks/0190f2a8-7b3c-7def-8123-456789abcdef', tokens.alice!), 404, 'not_found'],
      [call(`/v1/tasks/${task.id}`, tokens.daveTrigger!), 403, 'insufficient_scope'],
      [decide(task.id, tokens.daveRead!, { decision: 'approve' }), 403, 'insufficient_scope'],
      [decide(task.id, tokens.dave!, { decision: 'maybe' }), 400, 'validation_failed'],
      [decide(task.id, tokens.dave!, {}), 400, 'validation_failed'],
      [decide(task.id, tokens.dave!, { decision: 'approve', extra: true }), 400, 'validation_failed'],
      [decide(task.id, tokens.dave!, { decision: 'approve', comment: 'x'.repeat(10_001) }), 400, 'validation_failed'],
      [decide(task.id, tokens.dave!, { decision: 'approve', input: [1] }), 400, 'validation_failed'],
      [decide(task.id, tokens.dave!, { decision: 'approve' }, { headers: { 'idempotency-key': 'é' } }), 400, 'invalid_idempotency_key'],
      [decide(task.id, tokens.dave!, { decision: 'approve', input: { amount: 1 } }), 422, 'invalid_input'],
    ]
    for (const [sent, status, code] of cases) {
      const got = await sent
      expect({ status: got.status, code: got.body.code }).toEqual({ status, code })
      expect(got.body.error).toBeString()
      expect(got.body.message).toBeString()
    }
  })

  test('an Idempotency-Key makes a decision safe to retry; the same key with another body is 422', async () => {
    const task = await openTaskOf(await start('Race', 't-11'))
    const headers = { 'idempotency-key': 'decide-1' }
    const first = await decide(task.id, tokens.racer01!, { decision: 'approve', comment: 'yes' }, { headers })
    const replay = await decide(task.id, tokens.racer01!, { comment: 'yes', decision: 'approve' }, { headers })
    expect([first.status, replay.status, replay.headers.get('idempotent-replayed')]).toEqual([200, 200, 'true'])
    expect(replay.body).toMatchObject({ approvals: 1 })
    expect((await decide(task.id, tokens.racer01!, { decision: 'reject' }, { headers })).body.code).toBe('idempotency_key_reused')
    expect((await decide(task.id, tokens.racer01!, { decision: 'approve' })).body.code).toBe('already_decided')
  })

  test('a form outside the documented subset, or a template reading an unknown task, is refused when published, naming the field', async () => {
    const publish = (steps: unknown[]) =>
      call(`${PRODUCTION}/team/Support/workflows/Bad%20task`, tokens.aliceAll!, { method: 'PUT', json: { collection: 'orders', steps } })
    const cases: [unknown[], string][] = [
      [[approveStep({ form: { type: 'object', properties: { code: { type: 'string', pattern: '^x' } } } })], 'steps[0] (approve).form.properties.code.pattern'],
      [[approveStep({ form: { type: 'array' } })], 'steps[0] (approve).form.type'],
      [[approveStep({ form: { type: 'object', properties: { n: { type: 'number' } }, required: ['m'] } })], 'steps[0] (approve).form.required'],
      [[approveStep({ assignees: {} })], 'steps[0] (approve).assignees'],
      [[approveStep({ onTimeout: 'escalate', dueIn: { hours: 1 } })], 'steps[0] (approve).escalateTo'],
      [[stamp, approveStep()], 'steps[0] (stamp)'],
    ]
    for (const [steps, path] of cases) {
      const refused = await publish(steps)
      expect(refused.status).toBe(400)
      expect(JSON.stringify(refused.body)).toContain(path)
    }
    expect((await publish([approveStep({ form, dueIn: { hours: 24 }, onTimeout: 'escalate', escalateTo: { teams: ['Support'] } }), stamp])).status).toBeLessThan(300)
  })
})

describe('the database decides, whatever races', () => {
  test('twenty approvals at once on a task needing two: exactly two count, the rest are 409', async () => {
    const runId = await start('Race', 't-12')
    const task = await openTaskOf(runId)
    const answers = await Promise.all(RACERS.map((name, i) => decide(task.id, tokens[name]!, { decision: 'approve' }, { via: i % 2 === 0 ? app : other })))
    const statuses = answers.map((a) => a.status)
    expect(statuses.filter((s) => s === 200)).toHaveLength(2)
    expect(statuses.filter((s) => s === 409)).toHaveLength(18)
    expect(new Set(answers.filter((a) => a.status === 409).map((a) => a.body.code))).toEqual(new Set(['task_closed']))
    const decided = queryAll<{ n: number }>(env.store, 'SELECT count(*) AS n FROM task_decisions WHERE task_id = ?', task.id)[0]!.n
    expect(Number(decided)).toBe(2)
    expect((await runReaches(runId, 'succeeded', 'failed')).status).toBe('succeeded')
  })

  test('one user deciding ten times at once: one decision', async () => {
    const task = await openTaskOf(await start('Race', 't-13'))
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => decide(task.id, tokens.racer05!, { decision: 'approve' }, { via: i % 2 === 0 ? app : other })))
    expect(answers.map((a) => a.status).sort()).toEqual([200, ...Array(9).fill(409)])
    expect(new Set(answers.filter((a) => a.status === 409).map((a) => a.body.code))).toEqual(new Set(['already_decided']))
    const read = (await call(`/v1/tasks/${task.id}`, tokens.alice!)).body as unknown as TaskBody
    expect({ status: read.status, approvals: read.approvals }).toEqual({ status: 'open', approvals: 1 })
  })
})
