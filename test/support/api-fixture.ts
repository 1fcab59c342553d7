/**
 * The Acme fixture behind the real app, ready for requests made from /openapi.json (the conformance test, the fuzz):
 * alice — her password set, an instance administrator, admin of Acme — with an all-scopes token (the first token, id
 * `tokenId`) and a session; a workflow of its own with its webhook on (`Hooked`, so the calls on `Refund order` leave
 * its URL alone), a run, a note, two more tokens of alice's, an invitation of dave's, a completion callback on each
 * workflow and a failed delivery of the run, an open task (on a second run) that alice may decide. `known` holds a real value for
 * each path parameter and body field the document names, by name (an `id` by the collection before it: `notes/id`).
 */
import { read } from '../../src/db/read.ts'
import { findUserByStoredEmail } from '../../src/db/users.ts'
import { SESSION_COOKIE } from '../../src/lib/session-cookie.ts'
import { createSession } from '../../src/modules/auth/sessions.ts'
import { createInvitation } from '../../src/modules/users/invitations.ts'
import { execute, request, runNow, testApp, type TestEnv } from '../helpers.ts'
import { acmeDocument, applyAcme, hookPath, openTaskOnRun, tokenFor } from './acme.ts'
import type { Json } from './openapi-requests.ts'

export const ALICE = { email: 'alice@example.com', password: 'alice-demo-pass-2026' }

export interface ApiFixture {
  app: ReturnType<typeof testApp>
  /** `Bearer <alice's all-scopes token on Acme>`. */
  bearer: string
  tokenId: number
  /** `trellis_session=<alice's session>`. */
  cookie: string
  aliceId: number
  known: Record<string, string>
}

/** Budgets no fixture request reaches: the API limits answer 429, and these tests are about other answers. */
export const HIGH_API_BUDGETS = { TRELLIS_API_RATE_PER_MIN: '1000000', TRELLIS_API_RATE_PER_HOUR: '1000000', TRELLIS_API_RATE_PER_DAY: '1000000' }

/**
 * alice's password as an argon2id hash made with the cheapest parameters (1 MiB, one pass), made once: a login reads
 * the parameters from the stored hash, so checking it costs a millisecond instead of the ~100 ms of the product's own
 * (the fuzz signs in hundreds of times). Everything else about the login is as ever.
 */
let aliceHash: Promise<string> | undefined
const cheapAliceHash = () => (aliceHash ??= Bun.password.hash(ALICE.password, { algorithm: 'argon2id', memoryCost: 1024, timeCost: 1 }))

/** Applies Acme to `env`'s empty store and makes the rest (file comment). */
export async function seedApiFixture(env: TestEnv): Promise<ApiFixture> {
  await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, acmeDocument())
  const app = testApp(env)
  const token = await tokenFor(env.store, env.clock, 'alice', ['all'])
  const bearer = `Bearer ${token.value}`
  const known: Record<string, string> = {
    projectName: 'Acme',
    environmentName: 'production',
    teamName: 'Support',
    collectionName: 'orders',
    collection: 'orders',
    workflowName: 'Refund order',
    version: '1',
    recordId: 'ord_1001',
    record_id: 'ord_1001',
    email: ALICE.email,
    password: ALICE.password,
    cron: '0 9 * * 1-5',
    timezone: 'Europe/Paris',
    runAs: ALICE.email,
  }
  const send = (method: string, path: string, json?: unknown) => app.handle(request(path, { method, headers: { authorization: bearer }, json }))
  const hooked = await send('PUT', '/v1/project/Acme/environment/production/team/Support/workflows/Hooked', {
    collection: 'orders',
    webhook: { enabled: true, ratePerMinute: 100_000 },
    steps: [{ type: 'load' }],
  })
  // A schedule on Refund order, for the routes that read or remove one.
  await send('PUT', '/v1/project/Acme/environment/production/team/Support/workflows/Refund%20order/schedule', { cron: '0 9 * * 1-5', runAs: ALICE.email })
  known['hooks/token'] = hookPath(((await hooked.json()) as Json).webhook.url).slice('/v1/hooks/'.length)
  const run = await send('POST', '/v1/project/Acme/environment/production/workflow-runs', { workflowName: 'Hooked', teamName: 'Support', recordId: 'ord_1002' })
  known.runId = ((await run.json()) as Json).runId
  // An open task on a run of its own (cancelling the fixture's run would cancel it): alice started the run, and may
  // decide its task (the first valid decision closes it; later ones are 409).
  const asked = await send('POST', '/v1/project/Acme/environment/production/workflow-runs', { workflowName: 'Hooked', teamName: 'Support', recordId: 'ord_1003' })
  known.taskId = await openTaskOnRun(env.store, env.clock, ((await asked.json()) as Json).runId, { allowRequester: true })
  // A completion callback on each workflow, and a failed delivery of the run (set in place: the run stays queued, for
  // the routes that act on an active run; no worker sends it), which a resend can send again.
  const callbacks = (workflow: string) => `/v1/project/Acme/environment/production/team/Support/workflows/${workflow}/callbacks`
  known.callbackId = ((await (await send('POST', callbacks('Refund%20order'), { url: 'https://hooks.example.com/refund' })).json()) as Json).id
  const hookedCallback = ((await (await send('POST', callbacks('Hooked'), { url: 'https://hooks.example.com/hooked' })).json()) as Json).id
  known.url = 'https://hooks.example.com/conformance'
  // Record events on 'Refund order' (no dispatcher runs here: its events stay in the outbox), run as alice.
  known.runAs = ALICE.email
  await send('PUT', '/v1/project/Acme/environment/production/team/Support/workflows/Refund%20order/events', { on: [{ event: 'recordCreated' }], runAs: ALICE.email })
  known.deliveryId = `msg_${'0'.repeat(31)}1`
  execute(
    env.store,
    "INSERT INTO callback_deliveries (id, endpoint_id, run_id, type, payload, status, attempts, next_attempt_at, created_at, finished_at) VALUES (?, ?, ?, 'workflow_run.failed', '{}', 'failed', 1, ?, ?, ?)",
    known.deliveryId, hookedCallback, known.runId!, env.clock.now(), env.clock.now(), env.clock.now(),
  )
  const note = await send('POST', '/v1/project/Acme/environment/production/notes', {
    recordId: 'ord_1001', collectionName: 'orders', teamName: 'Support', title: 'Fixture', content: '<p>hello</p>',
  })
  known['notes/id'] = String(((await note.json()) as Json).id)
  known['tokens/id'] = String((await tokenFor(env.store, env.clock, 'alice', ['notes:read'])).token.id)
  known['api-tokens/id'] = String((await tokenFor(env.store, env.clock, 'alice', ['notes:read'])).token.id)
  // The instance routes answer this token 403 (instance administrators act through their session); the project
  // management routes act on dave, never on the token's own user.
  const dave = (await read(env.store, findUserByStoredEmail('dave@example.com')))!
  known['users/id'] = known.userId = String(dave.id)
  const alice = (await read(env.store, findUserByStoredEmail(ALICE.email)))!
  execute(env.store, 'UPDATE users SET is_instance_admin = TRUE, password_hash = ? WHERE id = ?', await cheapAliceHash(), alice.id)
  // POST /auth/invitation's `token`: an invitation of dave's (the first valid call spends it).
  known.token = (await runNow(env.store, createInvitation(env.clock, { user: dave, actorId: alice.id }))).token
  return { app, bearer, tokenId: token.token.id, cookie: await sessionCookie(env, alice.id), aliceId: alice.id, known }
}

/** A fresh session of user `userId` on `env`, as its Cookie header value. */
export async function sessionCookie(env: TestEnv, userId: number): Promise<string> {
  return `${SESSION_COOKIE}=${(await runNow(env.store, createSession(env.clock, userId, false))).id}`
}

/** The fixture's value for path parameter `name` of `path` (an `id` by the collection before it), or undefined. */
export function fixtureValue(known: Record<string, string>, path: string, name: string): string | undefined {
  const segments = path.split('/')
  const before = segments[segments.indexOf(`{${name}}`) - 1]
  return known[`${before}/${name}`] ?? known[name]
}
