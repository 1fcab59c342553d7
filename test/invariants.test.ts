/**
 * The rules that span several rows hold under concurrent requests through a real server
 * (Bun.serve on 127.0.0.1: requests interleave as they do in production), on both stores — never zero active
 * instance administrators, never a project without an admin, an invitation accepted once, the first administrator
 * made once, one active run per workflow and record, one user per email. (A token's name is not unique: two tokens
 * of one user may share a name, docs/api.md "Application tokens".) SQLite's one writer serialises each check with its act; on PostgreSQL the database does (docs/administration.md
 * "The rules under concurrency"): before that, each of these failed there.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createSession } from '../src/modules/auth/sessions.ts'
import { setProjectMember } from '../src/modules/members/service.ts'
import { createProject } from '../src/modules/projects/structure.ts'
import { SetupGate } from '../src/modules/setup/service.ts'
import { createInvitation } from '../src/modules/users/invitations.ts'
import { createUser, type User } from '../src/modules/users/service.ts'
import { systemClock } from '../src/lib/clock.ts'
import { anotherStore, execute, queryAll, queryOne, runNow, type SqlValue, TEST_STORE, testApp, type TestEnv, testEnv, type TestStore } from './helpers.ts'
import { acmeDocument, applyAcme, reportHook, tokenFor } from './support/acme.ts'
import type { ApplyReport } from '../src/modules/apply/service.ts'

/** Requests fired at once in each round. */
const CONCURRENT = 25
const ROUNDS = 3

let env: TestEnv
const servers: ReturnType<typeof Bun.serve>[] = []

/** The app behind a real server (stopped after the file); its base URL. */
function serve(app: ReturnType<typeof testApp>): string {
  const server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: (request) => app.handle(request) })
  servers.push(server)
  return `http://127.0.0.1:${server.port}`
}

let base: string

beforeAll(() => {
  env = testEnv()
  base = serve(testApp(env))
})
afterAll(async () => {
  for (const server of servers) await server.stop(true)
  env.cleanup()
})

interface Answer {
  status: number
  code?: string
}

/** Every request at once; each answer's status and error code (a 5XX fails the test with its body). */
async function all(requests: { url: string; method: string; cookie?: string; bearer?: string; json?: unknown }[]): Promise<Answer[]> {
  return Promise.all(
    requests.map(async ({ url, method, cookie, bearer, json }) => {
      const headers: Record<string, string> = {}
      if (cookie) headers.cookie = cookie
      if (bearer) headers.authorization = `Bearer ${bearer}`
      if (json !== undefined) headers['content-type'] = 'application/json'
      const response = await fetch(url, { method, headers, body: json === undefined ? undefined : JSON.stringify(json) })
      const text = await response.text()
      expect(response.status, text).toBeLessThan(500)
      return { status: response.status, code: text ? (JSON.parse(text) as { code?: string }).code : undefined }
    }),
  )
}

const keyOf = (a: Answer) => (a.code ? `${a.status} ${a.code}` : `${a.status}`)

/** The answers' statuses and codes, counted: `{ "200": 3, "409 last_instance_admin": 22 }`. */
const tally = (answers: Answer[]) =>
  answers.reduce<Record<string, number>>((counts, a) => {
    counts[keyOf(a)] = (counts[keyOf(a)] ?? 0) + 1
    return counts
  }, {})

/** The `n` of a `SELECT count(*) AS n …`. */
const count = (store: TestStore, statement: string, ...params: SqlValue[]) => Number(queryOne<{ n: number }>(store, statement, ...params)!.n)

async function seedUsers(prefix: string, count: number, input: { isInstanceAdmin?: boolean } = {}): Promise<User[]> {
  const users: User[] = []
  for (let i = 0; i < count; i++) {
    users.push(await runNow(env.store, createUser(env.clock, { email: `${prefix}-${i}@example.com`, username: `${prefix} ${i}`, actorId: null, ...input })))
  }
  return users
}

async function sessionCookie(user: User): Promise<string> {
  return `trellis_session=${(await runNow(env.store, createSession(env.clock, user.id, false))).id}`
}

/** `count` of each caller's requests about each target, round-robin over callers and targets. */
function everyPair<T>(callers: T[], targets: T[], count: number): [T, T, number][] {
  return Array.from({ length: count }, (_, i) => [callers[i % callers.length]!, targets[Math.floor(i / callers.length) % targets.length]!, i])
}

describe('never zero active instance administrators', () => {
  test(`${CONCURRENT} concurrent revocations and deactivations among five administrators, ${ROUNDS} rounds: one stays`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const admins = await seedUsers(`admin-r${round}`, 5, { isInstanceAdmin: true })
      // The earlier rounds' administrators step aside: this round's five are the only active ones.
      execute(env.store, 'UPDATE users SET is_instance_admin = ? WHERE id < ?', false, admins[0]!.id)
      const cookies = await Promise.all(admins.map(sessionCookie))
      const answers = await all(
        everyPair(admins.map((_, i) => i), admins.map((_, i) => i), CONCURRENT).map(([caller, target, i]) => ({
          url: `${base}/v1/instance/users/${admins[target]!.id}`,
          method: 'PUT',
          cookie: cookies[caller]!,
          // Alternately revoke, and deactivate (then revoke): both take an active administrator away.
          json: { username: admins[target]!.username, instanceAdmin: false, deactivated: i % 2 === 1 },
        })),
      )
      expect(count(env.store, 'SELECT count(*) AS n FROM users WHERE is_instance_admin = ? AND disabled_at IS NULL', true), JSON.stringify(tally(answers))).toBeGreaterThanOrEqual(1)
      // Every refusal is a clear one: the rule (409), or a caller no longer an administrator (403) or active (401).
      for (const a of answers) expect(['200', '401 unauthorized', '403 instance_admin_required', '409 last_instance_admin']).toContain(keyOf(a))
      expect(answers.some((a) => a.status === 409)).toBe(true)
    }
  }, 60_000)
})

describe('never a project without an admin', () => {
  test(`${CONCURRENT} concurrent demotions and removals among a project's five admins, ${ROUNDS} rounds: one stays`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const admins = await seedUsers(`project-admin-r${round}`, 5)
      const project = await runNow(env.store, createProject(env.clock, { name: `Race ${round}`, actorId: null }))
      for (const admin of admins) await runNow(env.store, setProjectMember(env.clock, { projectId: project.id, userId: admin.id, role: 'admin', actorId: null }))
      const cookies = await Promise.all(admins.map(sessionCookie))
      const answers = await all(
        everyPair(admins.map((_, i) => i), admins.map((_, i) => i), CONCURRENT).map(([caller, target, i]) => ({
          url: `${base}/v1/project/${encodeURIComponent(project.name)}/members/${admins[target]!.id}`,
          // Alternately demote and remove: both take an admin away (an admin demoting herself and the others included).
          ...(i % 2 === 0 ? { method: 'PUT', json: { role: 'developer' } } : { method: 'DELETE' }),
          cookie: cookies[caller]!,
        })),
      )
      expect(count(env.store, "SELECT count(*) AS n FROM project_members WHERE project_id = ? AND role = 'admin'", project.id), JSON.stringify(tally(answers))).toBeGreaterThanOrEqual(1)
      // Refusals: the rule (409), a caller no longer an admin of the project (403), a member removed already (404).
      for (const a of answers) expect(['200', '204', '403', '404', '409 last_project_admin']).toContain(a.status === 403 || a.status === 404 ? `${a.status}` : keyOf(a))
      expect(answers.some((a) => a.status === 409)).toBe(true)
    }
    expect(count(env.store, "SELECT count(*) AS n FROM projects p WHERE NOT EXISTS (SELECT 1 FROM project_members m WHERE m.project_id = p.id AND m.role = 'admin')")).toBe(0)
  }, 60_000)
})

describe('an invitation is accepted once', () => {
  test(`${CONCURRENT} concurrent acceptances of one link, ${ROUNDS} links: one 200 and one "accepted" entry each, the others 404`, async () => {
    const invited = await seedUsers('invited', ROUNDS)
    for (const user of invited) {
      const { token } = await runNow(env.store, createInvitation(env.clock, { user, actorId: null }))
      const answers = await all(Array.from({ length: CONCURRENT }, () => ({ url: `${base}/auth/invitation`, method: 'POST', json: { token, password: 'a-password-of-2026' } })))
      expect(tally(answers)).toEqual({ '200': 1, '404 invalid_invitation': CONCURRENT - 1 })
      const accepted = count(env.store, "SELECT count(*) AS n FROM admin_logs WHERE resource = 'invitation' AND type = 'update' AND user_id = ?", user.id)
      expect(accepted).toBe(1)
      expect(count(env.store, 'SELECT count(*) AS n FROM sessions WHERE user_id = ?', user.id)).toBe(1)
    }
  }, 120_000)
})

describe('the first administrator is made once', () => {
  test(`${CONCURRENT - 1} concurrent setups through two instances' links on one empty database: one user`, async () => {
    const empty = testEnv()
    try {
      const gates = [SetupGate.open(), SetupGate.open()]
      // Two instances sharing the database, each with the link it printed.
      const bases = gates.map(({ gate }) => serve(testApp(empty, { setupGate: gate })))
      const answers = await all(
        Array.from({ length: CONCURRENT - 1 }, (_, i) => ({
          url: `${bases[i % 2]}/setup`,
          method: 'POST',
          json: { token: gates[i % 2]!.token, email: `first-${i}@example.com`, username: `first ${i}`, password: 'a-password-of-2026' },
        })),
      )
      const counts = tally(answers)
      expect(counts['201'], JSON.stringify(counts)).toBe(1)
      for (const a of answers) expect(['201', '403 invalid_setup_token', '409 already_set_up']).toContain(keyOf(a))
      expect(count(empty.store, 'SELECT count(*) AS n FROM users')).toBe(1)
    } finally {
      empty.cleanup()
    }
  }, 60_000)
})

/** A fresh env with Acme applied on the real clock, bob's trigger token, and a served app: the run rules' setting. */
async function acmeRunsEnv(): Promise<{ env: TestEnv; report: ApplyReport; token: string; base: string }> {
  const runs = testEnv()
  const report = await applyAcme({ store: runs.store, clock: systemClock, secret: runs.secret, baseUrl: runs.config.baseUrl }, acmeDocument())
  const token = (await tokenFor(runs.store, systemClock, 'bob', ['workflows:trigger'])).value
  return { env: runs, report, token, base: serve(testApp(runs, { clock: systemClock })) }
}

describe('one active run per workflow and record', () => {
  let runsEnv: TestEnv
  let runsBase: string
  let report: ApplyReport
  let token: string

  beforeAll(async () => {
    ;({ env: runsEnv, report, token, base: runsBase } = await acmeRunsEnv())
  }, 60_000)
  afterAll(() => runsEnv?.cleanup())

  const trigger = (recordId: string, i: number) =>
    i % 2 === 0
      ? { url: `${runsBase}${reportHook(report, 'Refund order')}`, method: 'POST', json: { record_id: recordId } }
      : { url: `${runsBase}/v1/project/Acme/environment/production/workflow-runs`, method: 'POST', json: { teamName: 'Support', workflowName: 'Refund order', recordId } }

  test(`${CONCURRENT} concurrent starts for one record, by webhook and by hand, ${ROUNDS} records: one run each, the others 409`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const recordId = `one_active_${round}`
      const answers = await all(Array.from({ length: CONCURRENT }, (_, i) => ({ ...trigger(recordId, i), bearer: token })))
      expect(tally(answers)).toEqual({ '202': 1, '409 run_in_progress': CONCURRENT - 1 })
      expect(count(runsEnv.store, 'SELECT count(*) AS n FROM runs WHERE record_id = ?', recordId)).toBe(1)
    }
  }, 60_000)
})

describe('a user is made once per email', () => {
  test(`${CONCURRENT} concurrent creations of one email by two administrators, ${ROUNDS} emails: one user each, the others 409`, async () => {
    const cookies = await Promise.all((await seedUsers('creator', 2, { isInstanceAdmin: true })).map(sessionCookie))
    for (let round = 0; round < ROUNDS; round++) {
      const email = `twice-${round}@example.com`
      const answers = await all(
        Array.from({ length: CONCURRENT }, (_, i) => ({
          url: `${base}/v1/instance/users`,
          method: 'POST',
          cookie: cookies[i % 2]!,
          // The same address in other cases: emails are stored lower-cased, so these are one user.
          json: { email: i % 3 === 0 ? email.toUpperCase() : email, username: `twice ${round} ${i}` },
        })),
      )
      expect(tally(answers)).toEqual({ '201': 1, '409 user_exists': CONCURRENT - 1 })
      expect(count(env.store, 'SELECT count(*) AS n FROM users WHERE email = ?', email)).toBe(1)
    }
  }, 60_000)
})

describe.skipIf(TEST_STORE !== 'postgres')('runs of one environment queue under no lock (PostgreSQL: SQLite has one writer)', () => {
  let runsEnv: TestEnv
  let runsBase: string
  let token: string
  let holder: TestStore

  beforeAll(async () => {
    ;({ env: runsEnv, token, base: runsBase } = await acmeRunsEnv())
    holder = anotherStore(runsEnv)
  }, 60_000)
  afterAll(async () => {
    if (holder?.kind === 'postgres') await holder.close()
    runsEnv?.cleanup()
  })

  test(`${CONCURRENT} manual runs while another transaction is held open: each answered at once, listed once it ends, createdAt strictly increasing in the list's order`, async () => {
    if (holder.kind !== 'postgres' || runsEnv.store.kind !== 'postgres') throw new Error('PostgreSQL only')
    // Another connection's transaction has written (holds a transaction id) and stays open for a second: the lists'
    // pass lists nothing drawn after it began until it ends — but no run insert waits for it.
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    let opened!: () => void
    const isOpen = new Promise<void>((resolve) => (opened = resolve))
    const holding = holder.sql.begin(async (tx) => {
      await tx.unsafe('SELECT pg_current_xact_id()')
      opened()
      await released
    })
    await isOpen
    const sentAt = Date.now()
    const ids = await Promise.all(
      Array.from({ length: CONCURRENT }, async (_, i) => {
        const answer = await fetch(`${runsBase}/v1/project/Acme/environment/production/workflow-runs`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ teamName: 'Support', workflowName: 'Refund order', recordId: `dated_${i}` }),
        })
        expect(answer.status).toBe(202)
        return ((await answer.json()) as { runId: string }).runId
      }),
    )
    const answeredIn = Date.now() - sentAt
    const held = queryOne<{ n: number }>(runsEnv.store, "SELECT count(*)::int AS n FROM runs_unlisted u JOIN runs r ON r.id = u.run_id WHERE r.record_id LIKE 'dated_%'")!.n
    release()
    await holding
    expect(answeredIn).toBeLessThan(1_000) // no lock waited for
    expect(held).toBe(CONCURRENT) // none listed while the transaction was open
    expect(await runsEnv.store.awaitListed('runs')).toBe(true)
    const rows = queryAll<{ id: string; created_at: number }>(runsEnv.store, "SELECT id, created_at FROM runs WHERE record_id LIKE 'dated_%' ORDER BY created_at, id")
    expect(rows.map((r) => r.id).sort()).toEqual([...ids].sort())
    for (let i = 1; i < rows.length; i++) expect(rows[i]!.created_at).toBeGreaterThan(rows[i - 1]!.created_at)
    expect(queryOne<{ n: number }>(runsEnv.store, 'SELECT count(*)::int AS n FROM runs_unlisted')!.n).toBe(0)
  }, 60_000)
})
