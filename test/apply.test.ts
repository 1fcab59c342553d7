/** `applyDocument` against a test env's store, SQLite or PostgreSQL (DESIGN §9): idempotence, versions, webhook URLs, notes import, validation, atomicity. */
import { afterAll, afterEach, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { stringify as toYaml } from 'yaml'
import { ApplyError, type ApplyReport, parseApplyText } from '../src/modules/apply/service.ts'
import { verifyWebhookToken } from '../src/lib/webhook-url.ts'
import { applyNow, execute, queryAll, queryOne, repoRoot, tableContents, testEnv, type TestEnv } from './helpers.ts'
import { parseIsoMicros } from '../src/lib/time.ts'

const ACME = readFileSync(join(repoRoot, 'examples/acme.yaml'), 'utf8')
const BASE_URL = 'http://trellis.test'
// Each apply of the acme file hashes its four passwords (deliberately slow): seconds on a busy machine.
setDefaultTimeout(30_000)

const envs: TestEnv[] = []
afterEach(() => {
  for (const env of envs.splice(0)) env.cleanup()
})

function freshEnv(): TestEnv {
  const env = testEnv({ TRELLIS_BASE_URL: BASE_URL })
  envs.push(env)
  return env
}

async function apply(env: TestEnv, source: string | object): Promise<ApplyReport> {
  const text = typeof source === 'string' ? source : toYaml(source)
  return applyNow(parseApplyText(text), { store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl })
}

/** The ApplyError an apply throws; fails the test when it does not throw one. */
async function applyError(env: TestEnv, source: string | object): Promise<ApplyError> {
  try {
    await apply(env, source)
  } catch (error) {
    if (error instanceof ApplyError) return error
    throw error
  }
  throw new Error('expected the apply to fail')
}

function count(env: TestEnv, table: string, where = '1 = 1', ...params: (string | number)[]): number {
  return queryOne<{ n: number }>(env.store, `SELECT count(*) AS n FROM "${table}" WHERE ${where}`, ...params)!.n
}

function snapshot(env: TestEnv): string {
  return JSON.stringify(tableContents(env.store))
}

/** A note time as stored: epoch µs (docs/design-decisions.md "Times"). */
const iso = (text: string) => parseIsoMicros(text)!

/** A small valid file that the validation cases break one field at a time. */
function baseDocument() {
  return {
    users: [
      { email: 'alice@example.com', username: 'alice' },
      { email: 'carol@example.com', username: 'carol' } as { email: string; username: string; password?: string; disabled?: boolean },
    ],
    projects: [
      {
        name: 'P',
        environments: ['production'],
        teams: [{ name: 'Support', members: ['alice@example.com'] }] as { name: string; members?: string[] }[],
        members: [{ user: 'alice@example.com', role: 'admin' }],
        collections: [{ name: 'orders', permissions: { Support: { read: true, edit: true } } }] as Record<string, unknown>[],
        records: [{ environment: 'production', collection: 'orders', id: 'o1', data: { status: 'paid' } }],
        workflows: [
          {
            name: 'W',
            environment: 'production',
            team: 'Support',
            collection: 'orders',
            webhook: { enabled: true },
            steps: [
              { type: 'load' },
              { type: 'condition', if: { field: 'status', equals: 'paid' }, else: 'end' },
              { type: 'update', set: { status: 'refunded' } },
              { type: 'note', title: 'Refund', content: '<p>{{workflow.name}} on {{record.id}}</p>' },
            ] as Record<string, unknown>[],
          },
        ] as Record<string, unknown>[],
        notes: [
          {
            environment: 'production',
            team: 'Support',
            collection: 'orders',
            recordId: 'o1',
            title: 'N',
            user: 'alice@example.com',
            createdAt: '2026-11-01T10:00:00.000Z',
            messages: [{ user: 'alice@example.com', content: '<p>hi</p>' }],
          },
        ] as Record<string, unknown>[],
      },
    ] as Record<string, any>[],
  }
}

type Doc = ReturnType<typeof baseDocument>

describe('apply examples/acme.yaml', () => {
  test('creates everything once; a second apply writes nothing at all', async () => {
    const env = freshEnv()
    const first = await apply(env, ACME)
    expect(first.updated).toBe(0)
    expect(first.created).toBe(31)
    expect(first.changes.every((c) => c.action === 'created')).toBe(true)
    expect(first.notInFile).toEqual([])

    const counts = Object.fromEntries(
      [
        'users', 'projects', 'environments', 'teams', 'team_members', 'project_members', 'collections',
        'collection_permissions', 'records', 'renderings', 'workflows', 'workflow_versions', 'webhook_triggers',
        'notes', 'note_messages',
      ].map((table) => [table, count(env, table)]),
    )
    expect(counts).toEqual({
      users: 4,
      projects: 1,
      environments: 2,
      teams: 2,
      team_members: 4,
      project_members: 4,
      collections: 2,
      collection_permissions: 2,
      records: 7,
      renderings: 2,
      workflows: 2,
      workflow_versions: 2,
      webhook_triggers: 2,
      notes: 3,
      note_messages: 4,
    })
    expect(count(env, 'users', 'password_hash IS NOT NULL')).toBe(4)
    expect(count(env, 'admin_logs')).toBeGreaterThan(0)

    const before = snapshot(env)
    env.clock.advance(60_000)
    const second = await apply(env, ACME)
    expect(second.created).toBe(0)
    expect(second.updated).toBe(0)
    expect(second.changes).toEqual([])
    expect(second.unchanged).toBe(first.created)
    expect(snapshot(env)).toBe(before)
    expect(second.workflows).toEqual(first.workflows)
  })

  test('passwords are hashed; an unchanged password is kept, a changed one replaced', async () => {
    const env = freshEnv()
    await apply(env, ACME)
    const hashOf = () =>
      queryOne<{ h: string }>(env.store, "SELECT password_hash AS h FROM users WHERE email = 'alice@example.com'")!.h
    const first = hashOf()
    expect(first).not.toContain('alice-demo-pass-2026')
    expect(Bun.password.verifySync('alice-demo-pass-2026', first)).toBe(true)

    await apply(env, ACME)
    expect(hashOf()).toBe(first)

    const report = await apply(env, ACME.replace('alice-demo-pass-2026', 'alice-new-pass-2027'))
    expect(report.changes).toEqual([{ action: 'updated', kind: 'user', name: 'alice@example.com' }])
    expect(Bun.password.verifySync('alice-new-pass-2027', hashOf())).toBe(true)
  })

  test('a new password or a deactivation through apply ends the user’s sessions; an unchanged user keeps them', async () => {
    const env = freshEnv()
    const doc = baseDocument()
    await apply(env, doc)
    const addSession = (email: string) =>
      execute(env.store, 'INSERT INTO sessions (id_hash, user_id, via_sso, created_at, expires_at) SELECT ?, id, FALSE, ?, ? FROM users WHERE email = ?',
        `hash-${email}`, env.clock.now(), env.clock.now() + 3_600_000, email)
    const sessionsOf = (email: string) => count(env, 'sessions', 'user_id = (SELECT id FROM users WHERE email = ?)', email)
    addSession('alice@example.com')
    addSession('carol@example.com')

    await apply(env, doc)
    expect(sessionsOf('alice@example.com')).toBe(1)

    doc.users[0]!.password = 'alice-new-password'
    doc.users[1]!.username = 'Carol'
    env.clock.advance(1000)
    const report = await apply(env, doc)
    expect(report.changes.filter((c) => c.kind === 'user')).toEqual([
      { action: 'updated', kind: 'user', name: 'alice@example.com' },
      { action: 'updated', kind: 'user', name: 'carol@example.com' },
    ])
    expect(sessionsOf('alice@example.com')).toBe(0)
    expect(sessionsOf('carol@example.com')).toBe(1) // a new username is not a reason to log out
    expect(count(env, 'users', "email = 'carol@example.com' AND username = 'Carol' AND updated_at = ?", env.clock.now())).toBe(1)

    doc.users[1]!.disabled = true
    await apply(env, doc)
    expect(sessionsOf('carol@example.com')).toBe(0)
    expect(count(env, 'users', 'disabled_at IS NOT NULL')).toBe(1)
    doc.users[1]!.disabled = false
    expect((await apply(env, doc)).changes).toEqual([{ action: 'updated', kind: 'user', name: 'carol@example.com' }])
    expect(count(env, 'users', 'disabled_at IS NOT NULL')).toBe(0)
  })
})

describe('workflow versions', () => {
  const project = (doc: Doc) => doc.projects[0]!
  const versions = (env: TestEnv) =>
    queryAll<{ id: number; version: number }>(env.store, "SELECT v.id, v.version FROM workflow_versions v JOIN workflows w ON w.id = v.workflow_id WHERE w.name = 'W' ORDER BY v.version")
  const activeVersionId = (env: TestEnv) =>
    queryOne<{ id: number }>(env.store, "SELECT active_version_id AS id FROM workflows WHERE name = 'W'")!.id

  test('a changed step publishes version 2 and makes it active', async () => {
    const env = freshEnv()
    const doc = baseDocument()
    const first = await apply(env, doc)
    expect(first.workflows[0]!.version).toBe(1)
    expect(versions(env).map((v) => v.version)).toEqual([1])

    doc.projects[0]!.workflows[0]!.steps[2] = { type: 'update', set: { status: 'refunded', refundedBy: '{{workflow.name}}' } }
    env.clock.advance(1000)
    const second = await apply(env, doc)
    const rows = versions(env)
    expect(rows.map((v) => v.version)).toEqual([1, 2])
    expect(activeVersionId(env)).toBe(rows[1]!.id)
    expect(second.changes).toEqual([{ action: 'published', kind: 'workflow', name: 'P/production/Support/W' }])
    expect(second.workflows[0]!.version).toBe(2)
    expect(second.created).toBe(0)
    expect(second.updated).toBe(1)
    expect(count(env, 'admin_logs', "resource = 'workflow' AND type = 'update'")).toBe(1)
  })

  test('a task step (form, dueIn, escalateTo) is published as written; applied again, nothing changes', async () => {
    const env = freshEnv()
    const doc = baseDocument()
    const task = {
      type: 'task',
      name: 'approve',
      title: 'Refund {{record.id}}?',
      assignees: { teams: ['Support'], users: ['carol@example.com'] },
      approvals: 2,
      allowRequester: false,
      form: {
        type: 'object',
        properties: { amount: { type: 'number', minimum: 0, maximum: 500, title: 'Amount to refund' }, reason: { type: 'string', enum: ['damaged', 'late', 'other'] } },
        required: ['amount'],
      },
      dueIn: { hours: 24 },
      onTimeout: 'escalate',
      escalateTo: { users: ['alice@example.com'] },
      onReject: 'end',
    }
    project(doc).members.push({ user: 'carol@example.com', role: 'user' })
    project(doc).workflows[0]!.steps.splice(2, 0, task)
    project(doc).workflows[0]!.steps[3] = { type: 'update', set: { status: 'refunded', refunded: '{{tasks.approve.input.amount}}', by: '{{tasks.approve.decidedBy}}' } }
    const report = await apply(env, doc)
    expect(report.workflows[0]).toMatchObject({ name: 'W', version: 1 })
    const stored = queryOne<{ definition: string }>(env.store, "SELECT v.definition FROM workflow_versions v JOIN workflows w ON w.active_version_id = v.id WHERE w.name = 'W'")!
    expect((JSON.parse(stored.definition) as { steps: unknown[] }).steps[2]).toEqual(task)
    const before = snapshot(env)
    expect((await apply(env, doc)).changes).toEqual([])
    expect(snapshot(env)).toBe(before)
  })

  test('re-ordering keys in the file is not a new version', async () => {
    const env = freshEnv()
    await apply(env, baseDocument())
    const before = snapshot(env)
    const reordered = `
projects:
  - workflows:
      - steps:
          - type: load
          - else: end
            if: { equals: paid, field: status }
            type: condition
          - set: { status: refunded }
            type: update
          - content: "<p>{{workflow.name}} on {{record.id}}</p>"
            title: Refund
            type: note
        webhook: { enabled: true }
        collection: orders
        team: Support
        environment: production
        name: W
    name: P
`
    const report = await apply(env, reordered)
    expect(report.created + report.updated).toBe(0)
    expect(report.workflows[0]!.version).toBe(1)
    expect(snapshot(env)).toBe(before)
  })

  test('changing only webhook.enabled updates the trigger, not the version', async () => {
    const env = freshEnv()
    const doc = baseDocument()
    const first = await apply(env, doc)
    const url = first.workflows[0]!.webhook.url
    expect(url).not.toBeNull()

    doc.projects[0]!.workflows[0]!.webhook = { enabled: false }
    const disabled = await apply(env, doc)
    expect(versions(env)).toHaveLength(1)
    expect(disabled.changes).toEqual([{ action: 'updated', kind: 'workflow', name: 'P/production/Support/W' }])
    expect(disabled.workflows[0]).toMatchObject({ version: 1, webhook: { enabled: false, url: null } })
    expect(count(env, 'webhook_triggers', 'enabled = FALSE')).toBe(1)
    expect(count(env, 'admin_logs', "resource = 'workflow-webhook'")).toBe(2) // enabled on creation, then disabled

    doc.projects[0]!.workflows[0]!.webhook = { enabled: true, ratePerMinute: 5 }
    const enabled = await apply(env, doc)
    expect(versions(env)).toHaveLength(1)
    // Enabling again restores the same URL: a pause, not a reset.
    expect(enabled.workflows[0]!.webhook).toEqual({ enabled: true, ratePerMinute: 5, url })
    expect(count(env, 'webhook_triggers', 'enabled = TRUE AND rate_per_minute = 5 AND generation = 1')).toBe(1)
  })
})

describe('webhook URLs in the report', () => {
  test('signed, stable across re-applies and new versions; null when disabled', async () => {
    const env = freshEnv()
    const report = await apply(env, ACME)
    const refund = report.workflows.find((w) => w.name === 'Refund order')!
    const dunning = report.workflows.find((w) => w.name === 'Start dunning')!
    expect(refund).toMatchObject({ project: 'Acme', environment: 'production', team: 'Support', version: 1 })
    expect(refund.webhook.enabled).toBe(true)
    expect(refund.webhook.ratePerMinute).toBe(60)
    expect(dunning.webhook).toEqual({ enabled: false, ratePerMinute: null, url: null })

    const url = refund.webhook.url!
    const match = /^http:\/\/trellis\.test\/v1\/hooks\/([A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43})$/.exec(url)
    expect(match).not.toBeNull()
    const token = match![1]!
    const row = queryOne<{ id: number; renderingId: number }>(env.store, `SELECT id, rendering_id AS "renderingId" FROM workflows WHERE name = 'Refund order'`)!
    expect(verifyWebhookToken(env.secret, token)).toEqual({ workflowId: row.id, renderingId: row.renderingId, generation: 1 })
    expect(verifyWebhookToken(Buffer.from('another-secret-another-secret-0123456'), token)).toBeNull()

    expect((await apply(env, ACME)).workflows.find((w) => w.name === 'Refund order')!.webhook.url).toBe(url)

    const changed = ACME.replace('seconds: 5', 'seconds: 10')
    expect(changed).not.toBe(ACME)
    const published = (await apply(env, changed)).workflows.find((w) => w.name === 'Refund order')!
    expect(published.version).toBe(2)
    expect(published.webhook.url).toBe(url)
  })
})

describe('items missing from a later file', () => {
  test('are reported in notInFile and kept', async () => {
    const env = freshEnv()
    const full = baseDocument()
    full.users.push({ email: 'bob@example.com', username: 'bob' })
    const project = full.projects[0]!
    project.environments.push('staging')
    project.teams.push({ name: 'Billing', members: ['bob@example.com'] })
    project.members.push({ user: 'bob@example.com', role: 'editor' })
    project.collections.push({ name: 'customers' })
    project.workflows.push({ name: 'W2', environment: 'staging', team: 'Billing', collection: 'customers', steps: [{ type: 'load' }] })
    full.projects.push({ name: 'Other', environments: ['production'] })
    await apply(env, full)
    const before = snapshot(env)

    const smaller = baseDocument()
    smaller.users = smaller.users.filter((u) => u.email !== 'carol@example.com')
    smaller.users.push({ email: 'bob@example.com', username: 'bob' })
    const report = await apply(env, smaller)
    expect(report.created + report.updated).toBe(0)
    expect(report.notInFile).toEqual(
      expect.arrayContaining([
        { kind: 'user', name: 'carol@example.com' },
        { kind: 'environment', name: 'P/staging' },
        { kind: 'team', name: 'P/Billing' },
        { kind: 'member', name: 'P/bob@example.com' },
        { kind: 'collection', name: 'P/customers' },
        { kind: 'workflow', name: 'P/staging/Billing/W2' },
        { kind: 'project', name: 'Other' },
      ]),
    )
    expect(report.notInFile).toHaveLength(7)
    expect(snapshot(env)).toBe(before)
    expect(count(env, 'users', "email = 'carol@example.com'")).toBe(1)
    expect(count(env, 'projects', "name = 'Other'")).toBe(1)
    expect(count(env, 'workflows', "name = 'W2'")).toBe(1)
  })

  test('a list left out of the file is not managed, so nothing is reported for it', async () => {
    const env = freshEnv()
    await apply(env, baseDocument())
    const report = await apply(env, { projects: [{ name: 'P' }] })
    expect(report.notInFile).toEqual([])
  })
})

describe('notes import', () => {
  const noteRows = (env: TestEnv) =>
    queryAll<{ id: number; title: string; created_at: number; updated_at: number; archived_at: number | null }>(
      env.store,
      'SELECT id, title, created_at, updated_at, archived_at FROM notes ORDER BY id',
    )

  test('keeps the given times, sanitises messages, orders undated notes, and does not duplicate on re-apply', async () => {
    const env = freshEnv()
    const doc = baseDocument()
    const note = (title: string, extra: Record<string, unknown> = {}) => ({
      environment: 'production', team: 'Support', collection: 'orders', recordId: 'o1', title, user: 'alice@example.com', ...extra,
    })
    doc.projects[0]!.notes = [
      note('Dated', {
        createdAt: '2026-11-04T09:12:00.123456Z',
        updatedAt: '2026-11-04T11:30:00.000Z',
        archivedAt: '2026-11-05T08:00:00+02:00',
        messages: [
          { user: 'alice@example.com', content: '<p>first</p>', createdAt: '2026-11-04T09:12:00.123Z' },
          {
            user: 'carol@example.com',
            content:
              '<p onclick="alert(1)"><b>Bold</b> <a href="javascript:alert(1)">bad</a> <a href="https://example.com/t/4711">good</a></p><script>alert(2)</script>',
            createdAt: '2026-11-04T11:30:00.000Z',
          },
        ],
      }),
      note('Undated 1', { messages: [{ user: 'alice@example.com', content: '<p>a</p>' }] }),
      note('Undated 2'),
      note('Undated 3'),
    ]
    await apply(env, doc)

    const rows = noteRows(env)
    expect(rows.map((r) => r.title)).toEqual(['Dated', 'Undated 1', 'Undated 2', 'Undated 3'])
    const dated = rows[0]!
    expect(dated.created_at).toBe(iso('2026-11-04T09:12:00.123456Z')) // to the microsecond
    expect(dated.updated_at).toBe(iso('2026-11-04T11:30:00.000Z'))
    expect(dated.archived_at).toBe(iso('2026-11-05T06:00:00.000Z'))

    const messages = queryAll<{ content: string; created_at: number }>(env.store, 'SELECT content, created_at FROM note_messages WHERE note_id = ? ORDER BY id', dated.id)
    expect(messages.map((m) => m.created_at)).toEqual([iso('2026-11-04T09:12:00.123Z'), iso('2026-11-04T11:30:00.000Z')])
    const html = messages[1]!.content
    expect(html).not.toContain('<script')
    expect(html).not.toContain('alert(2)')
    expect(html).not.toContain('onclick')
    expect(html).not.toContain('javascript:')
    expect(html).toContain('<p><b>Bold</b>')
    expect(html).toContain('href="https://example.com/t/4711"')

    const undated = rows.slice(1)
    for (let i = 1; i < undated.length; i++) expect(undated[i]!.created_at).toBeGreaterThan(undated[i - 1]!.created_at)
    expect(undated[0]!.created_at).toBeGreaterThanOrEqual(env.clock.now())
    // A message without createdAt takes its note's.
    const undatedMessage = queryOne<{ created_at: number }>(env.store, 'SELECT created_at FROM note_messages WHERE note_id = ?', undated[0]!.id)!
    expect(undatedMessage.created_at).toBe(undated[0]!.created_at)

    const before = snapshot(env)
    env.clock.advance(3_600_000)
    const again = await apply(env, doc)
    expect(again.created + again.updated).toBe(0)
    expect(count(env, 'notes')).toBe(4)
    expect(count(env, 'note_messages')).toBe(3)
    expect(snapshot(env)).toBe(before)
  })

  test('without updatedAt, a note is as recent as its newest message or archive time', async () => {
    const env = freshEnv()
    const doc = baseDocument()
    doc.projects[0]!.notes = [
      {
        environment: 'production', team: 'Support', collection: 'orders', recordId: 'o1', title: 'T', user: 'alice@example.com',
        createdAt: '2026-11-01T00:00:00Z',
        messages: [
          { user: 'alice@example.com', content: 'x', createdAt: '2026-11-01T00:00:00Z' },
          { user: 'alice@example.com', content: 'y', createdAt: '2026-11-03T00:00:00Z' },
        ],
      },
    ]
    await apply(env, doc)
    expect(noteRows(env)[0]!.updated_at).toBe(iso('2026-11-03T00:00:00Z'))
  })
})

describe('validation', () => {
  const bob = 'bob@example.com'
  const project = (doc: Doc) => doc.projects[0]!
  const cases: { name: string; expected: string; text?: string; mutate?: (doc: Doc) => void }[] = [
    {
      name: 'unknown user in team members',
      expected: 'projects[0].teams[1].members[0]: unknown user bob@example.com',
      mutate: (d) => project(d).teams.push({ name: 'Billing', members: [bob] }),
    },
    {
      name: 'unknown user in members',
      expected: 'projects[0].members[1].user: unknown user bob@example.com',
      mutate: (d) => project(d).members.push({ user: bob, role: 'user' }),
    },
    { name: 'unknown user in notes', expected: 'projects[0].notes[0].user: unknown user bob@example.com', mutate: (d) => (project(d).notes[0]!.user = bob) },
    {
      name: 'unknown user in note messages',
      expected: 'projects[0].notes[0].messages[0].user: unknown user bob@example.com',
      mutate: (d) => ((project(d).notes[0]!.messages as { user: string }[])[0]!.user = bob),
    },
    {
      name: 'unknown environment in records',
      expected: 'projects[0].records[0].environment: unknown environment staging',
      mutate: (d) => (project(d).records[0]!.environment = 'staging'),
    },
    {
      name: 'unknown collection in records',
      expected: 'projects[0].records[0].collection: unknown collection invoices',
      mutate: (d) => (project(d).records[0]!.collection = 'invoices'),
    },
    {
      name: 'unknown environment in workflows',
      expected: 'projects[0].workflows[0].environment: unknown environment staging',
      mutate: (d) => (project(d).workflows[0]!.environment = 'staging'),
    },
    {
      name: 'unknown team in workflows',
      expected: 'projects[0].workflows[0].team: unknown team Billing',
      mutate: (d) => (project(d).workflows[0]!.team = 'Billing'),
    },
    {
      name: 'unknown collection in workflows',
      expected: 'projects[0].workflows[0].collection: unknown collection invoices',
      mutate: (d) => (project(d).workflows[0]!.collection = 'invoices'),
    },
    {
      name: 'unknown environment in notes',
      expected: 'projects[0].notes[0].environment: unknown environment staging',
      mutate: (d) => (project(d).notes[0]!.environment = 'staging'),
    },
    { name: 'unknown team in notes', expected: 'projects[0].notes[0].team: unknown team Billing', mutate: (d) => (project(d).notes[0]!.team = 'Billing') },
    {
      name: 'unknown collection in notes',
      expected: 'projects[0].notes[0].collection: unknown collection invoices',
      mutate: (d) => (project(d).notes[0]!.collection = 'invoices'),
    },
    {
      name: 'unknown team in collection permissions',
      expected: 'projects[0].collections[0].permissions.Billing: unknown team Billing',
      mutate: (d) => (project(d).collections[0]!.permissions = { Support: { read: true }, Billing: { read: true } }),
    },
    {
      name: 'duplicate user email (case-insensitive)',
      expected: 'users[2].email: duplicate user alice@example.com',
      mutate: (d) => d.users.push({ email: 'Alice@Example.com', username: 'alice2' }),
    },
    { name: 'duplicate project', expected: 'projects[1].name: duplicate project P', mutate: (d) => d.projects.push({ name: 'P' }) },
    {
      name: 'duplicate environment',
      expected: 'projects[0].environments[1]: duplicate environment production',
      mutate: (d) => project(d).environments.push('production'),
    },
    { name: 'duplicate team', expected: 'projects[0].teams[1]: duplicate team Support', mutate: (d) => project(d).teams.push({ name: 'Support' }) },
    {
      name: 'duplicate collection',
      expected: 'projects[0].collections[1]: duplicate collection orders',
      mutate: (d) => project(d).collections.push({ name: 'orders' }),
    },
    {
      name: 'duplicate record',
      expected: 'projects[0].records[1].id: duplicate record orders/o1 in production',
      mutate: (d) => project(d).records.push({ environment: 'production', collection: 'orders', id: 'o1', data: {} }),
    },
    {
      name: 'duplicate workflow',
      expected: 'projects[0].workflows[1].name: duplicate workflow W for Support in production',
      mutate: (d) => project(d).workflows.push({ ...project(d).workflows[0] }),
    },
    { name: 'bad role', expected: 'projects[0].members[0].role: ', mutate: (d) => (project(d).members[0]!.role = 'owner') },
    {
      name: 'bad email',
      expected: 'users[2].email: "dave-at-example.com" is not an email address',
      mutate: (d) => d.users.push({ email: 'dave-at-example.com', username: 'dave' }),
    },
    { name: 'short password', expected: 'users[0].password: must be at least 12 characters', mutate: (d) => (d.users[0]!.password = 'short') },
    { name: 'missing username', expected: 'users[1].username: ', mutate: (d) => delete (d.users[1] as { username?: string }).username },
    { name: 'unknown top-level field', expected: 'usres: unknown field', mutate: (d) => Object.assign(d, { usres: [] }) },
    {
      name: 'unknown field in a project (typo)',
      expected: 'projects[0].enviroments: unknown field',
      mutate: (d) => Object.assign(project(d), { enviroments: ['staging'] }),
    },
    {
      name: 'unknown field in a team (typo)',
      expected: 'projects[0].teams[0].memebers: unknown field',
      mutate: (d) => Object.assign(project(d).teams[0]!, { memebers: [] }),
    },
    {
      name: 'unknown field in a workflow (typo)',
      expected: 'projects[0].workflows[0].colection: unknown field',
      mutate: (d) => Object.assign(project(d).workflows[0]!, { colection: 'orders' }),
    },
    {
      name: 'unknown field in a step (typo)',
      expected: 'projects[0].workflows[0].steps[2] (3-update).sett: unknown field',
      mutate: (d) => Object.assign(project(d).workflows[0]!.steps[2]!, { sett: {} }),
    },
    {
      name: 'invalid ISO date in notes createdAt',
      expected: 'projects[0].notes[0].createdAt: invalid ISO 8601 date-time "2026-13-01T00:00:00Z"',
      mutate: (d) => (project(d).notes[0]!.createdAt = '2026-13-01T00:00:00Z'),
    },
    {
      name: 'a note time beyond what epoch µs holds exactly',
      expected: 'projects[0].notes[0].archivedAt: "3000-01-01T00:00:00Z" is outside the years 1685–2255 a note time can hold',
      mutate: (d) => (project(d).notes[0]!.archivedAt = '3000-01-01T00:00:00Z'),
    },
    {
      name: 'invalid ISO date in a message',
      expected: 'projects[0].notes[0].messages[0].createdAt: invalid ISO 8601 date-time "yesterday"',
      mutate: (d) => ((project(d).notes[0]!.messages as { createdAt?: string }[])[0]!.createdAt = 'yesterday'),
    },
    {
      name: 'unknown step type',
      expected: 'projects[0].workflows[0].steps[1].type: unknown step type "branch"',
      mutate: (d) => (project(d).workflows[0]!.steps[1] = { type: 'branch' }),
    },
    {
      name: 'a step type named like an Object.prototype member',
      expected: 'projects[0].workflows[0].steps[1].type: unknown step type "constructor"',
      mutate: (d) => (project(d).workflows[0]!.steps[1] = { type: 'constructor' }),
    },
    {
      name: 'update step without set',
      expected: 'projects[0].workflows[0].steps[2] (3-update).set: ',
      mutate: (d) => (project(d).workflows[0]!.steps[2] = { type: 'update' }),
    },
    {
      name: 'bad template variable',
      expected: 'projects[0].workflows[0].steps[3] (4-note).content: unknown template variable {{foo}}',
      mutate: (d) => (project(d).workflows[0]!.steps[3]!.content = '<p>{{foo}}</p>'),
    },
    {
      name: 'a template in an http step\'s host (it could change the host)',
      expected: 'projects[0].workflows[0].steps[4] (call).url: {{record.id}} is in the URL\'s scheme or host',
      mutate: (d) => project(d).workflows[0]!.steps.push({ type: 'http', name: 'call', method: 'POST', url: 'http://127.0.0{{record.id}}:19192/' }),
    },
    {
      name: 'a task step whose form leaves the documented JSON Schema subset',
      expected: 'projects[0].workflows[0].steps[4] (approve).form.properties.amount.type: must be one of string, number, integer, boolean',
      mutate: (d) =>
        project(d).workflows[0]!.steps.push({
          type: 'task', name: 'approve', title: 'Refund?', assignees: { teams: ['Support'] }, form: { type: 'object', properties: { amount: { type: 'array' } } },
        }),
    },
    {
      name: 'condition without a prior load',
      expected: 'projects[0].workflows[0].steps[0] (1-condition): a condition needs a load step before it',
      mutate: (d) => project(d).workflows[0]!.steps.shift(),
    },
    { name: 'empty file', expected: '(file): the file is empty', text: '' },
    { name: 'file with only comments', expected: '(file): the file is empty', text: '# nothing here\n' },
    { name: 'YAML syntax error', expected: '(file) line 3: ', text: 'users:\n  - email: a@example.com\n   username: [a\n' },
    { name: 'not a mapping', expected: '(root): must be an object', text: '- users\n- projects\n' },
  ]

  test('the base document is valid', async () => {
    const env = freshEnv()
    expect((await apply(env, baseDocument())).created).toBeGreaterThan(0)
  })

  // The cases share one empty env: each fails and is checked to write nothing (a fresh PostgreSQL database each is slow).
  let shared: TestEnv | null = null
  afterAll(() => shared?.cleanup())

  test.each(cases)('$name', async ({ expected, text, mutate }) => {
    const env = (shared ??= testEnv({ TRELLIS_BASE_URL: BASE_URL }))
    const source = text ?? (() => {
      const doc = baseDocument()
      mutate!(doc)
      return toYaml(doc)
    })()
    const before = snapshot(env)
    const error = await applyError(env, source)
    expect(error.message).toContain(expected)
    expect(error.problems.length).toBeGreaterThan(0)
    // Every problem names where it is.
    for (const problem of error.problems) {
      expect(problem.path.length).toBeGreaterThan(0)
      expect(error.message).toContain(`${problem.path}: ${problem.message}`)
    }
    expect(snapshot(env)).toBe(before)
  })

  test('a user known only to the database is not an unknown user', async () => {
    const env = freshEnv()
    await apply(env, baseDocument())
    const doc = baseDocument()
    delete (doc as { users?: unknown }).users
    project(doc).teams.push({ name: 'Billing', members: ['CAROL@example.com'] })
    expect((await apply(env, doc)).changes.map((c) => c.name)).toContain('P/Billing/carol@example.com')
  })
})

describe('atomicity', () => {
  /** Valid users and projects, then one bad note at the very end. */
  function lastItemBroken(doc: Doc): Doc {
    doc.users.push({ email: 'erin@example.com', username: 'erin', password: 'erin-long-password' })
    doc.projects.push({
      name: 'Later',
      environments: ['production'],
      teams: [{ name: 'Ops', members: ['erin@example.com'] }],
      members: [{ user: 'erin@example.com', role: 'admin' }],
      collections: [{ name: 'tickets' }],
      records: [{ environment: 'production', collection: 'tickets', id: 't1', data: { a: 1 } }],
      notes: [
        { environment: 'production', team: 'Ops', collection: 'tickets', recordId: 't1', title: 'ok', user: 'erin@example.com' },
        { environment: 'production', team: 'Ops', collection: 'tickets', recordId: 't1', title: 'bad', user: 'nobody@example.com' },
      ],
    })
    return doc
  }

  test('on an empty database, a bad last item writes nothing', async () => {
    const env = freshEnv()
    const before = snapshot(env)
    const error = await applyError(env, lastItemBroken(baseDocument()))
    expect(error.message).toBe('projects[1].notes[1].user: unknown user nobody@example.com')
    expect(snapshot(env)).toBe(before)
  })

  test('on a database with acme applied, a bad last item writes nothing', async () => {
    const env = freshEnv()
    await apply(env, ACME)
    const before = snapshot(env)
    env.clock.advance(1000)
    // The acme file with changes everywhere (a new user, a changed record, a changed workflow, a new note) and a bad tail.
    const changedAcme = () => {
      const acme = parseApplyText(ACME) as Doc
      acme.users.push({ email: 'frank@example.com', username: 'frank', password: 'frank-long-password' })
      acme.projects[0]!.records[0]!.data = { status: 'refunded' }
      acme.projects[0]!.workflows[0]!.steps.pop()
      acme.projects[0]!.notes.push({ ...acme.projects[0]!.notes[0]!, title: 'another' })
      acme.projects.push(...baseDocument().projects) // its users (alice, carol) are acme's too
      return lastItemBroken(acme)
    }
    const error = await applyError(env, changedAcme())
    expect(error.message).toBe('projects[2].notes[1].user: unknown user nobody@example.com')
    expect(snapshot(env)).toBe(before)

    // The same file without its bad tail applies.
    const fixed = changedAcme()
    fixed.projects.at(-1)!.notes.pop()
    const report = await apply(env, fixed)
    expect(report.created).toBeGreaterThan(0)
    expect(report.changes).toContainEqual({ action: 'published', kind: 'workflow', name: 'Acme/production/Support/Refund order' })
    // Three applies of the acme file, each checking or hashing its passwords (argon2: a second each on a busy machine).
  }, 90_000)
})
