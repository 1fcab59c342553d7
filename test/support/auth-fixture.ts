/**
 * The fixture of test/auth.test.ts and test/tokens.test.ts: examples/acme.yaml (+ a second project Beta and an SSO
 * project Secure) applied once, then every test gets its own copy of the database (SQLite: the file, VACUUM INTO;
 * PostgreSQL: CREATE DATABASE … TEMPLATE) in its own temp dir with its own manual clock; tokens and sessions straight through the services; DESIGN §5 error checks
 * on a raw Response. A file using `fixture()` calls `useFixtureCleanup()` once at its top level.
 */
import { afterAll, afterEach, beforeAll, expect } from 'bun:test'
import { readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { openStore } from '../../src/db/sqlite/store.ts'
import { writeNow } from '../../src/db/write.ts'
import { parseApplyText } from '../../src/modules/apply/service.ts'
import { createSession } from '../../src/modules/auth/sessions.ts'
import { createToken, type Scope } from '../../src/modules/tokens/service.ts'
import { applyNow, postgresTestStore, queryOne, repoRoot, request, runNow, sqliteOf, testApp, type TestEnv, testEnv, type TestStore } from '../helpers.ts'
import { projectId as projectIdOf } from './acme.ts'
import type { ErrorObject } from './compat-schema.ts'
import { expectErrorResponse } from './scenarios.ts'


export const ACME = join(repoRoot, 'examples/acme.yaml')
export const PASSWORDS: Record<string, string> = {
  'alice@example.com': 'alice-demo-pass-2026',
  'bob@example.com': 'bob-demo-pass-2026',
  'carol@example.com': 'carol-demo-pass-2026',
  'dave@example.com': 'dave-demo-pass-2026',
}
/** A second project (Beta) where alice is also an admin, and an SSO project (Secure). */
export const EXTRA_PROJECTS = `
projects:
  - name: Beta
    environments: [production]
    members: [{ user: alice@example.com, role: admin }]
  - name: Secure
    sso: true
    environments: [production]
    members: [{ user: alice@example.com, role: admin }]
`
export const TOKEN_SHAPE = /^trl_[A-Za-z0-9_-]{43}$/
export const NOTES = '/v1/project/Acme/environment/production/notes'
export const NEW_NOTE = { recordId: 'ord_1001', collectionName: 'orders', teamName: 'Support', title: 'Checked', content: '<p>ok</p>' }
export const READ_ONLY = ['activity_logs:read', 'admin_logs:read', 'notes:read']

// ── Fixture ─────────────────────────────────────────────────────────────────
// Applying the yaml hashes four argon2id passwords (~1 s): do it once (before the file's tests), then give every
// test its own copy: on SQLite of the database file (VACUUM INTO) in its own temp dir, on PostgreSQL of the database
// (CREATE DATABASE … TEMPLATE, the template's pool closed first: PostgreSQL copies only a database nobody is in).

interface Template {
  env: TestEnv
  /** The applied database in a fresh env of its own. */
  copy(base: TestEnv): TestEnv
}
let template: Template | undefined
/** Run (newest first) after each test of a file that called `useFixtureCleanup`. */
export const cleanups: (() => void)[] = []
/** Registers the hooks that build the applied template, remove each test's copy and, at the end, the template. */
export function useFixtureCleanup(): void {
  beforeAll(async () => {
    template ??= await appliedTemplate()
  })
  afterEach(() => {
    for (const cleanup of cleanups.splice(0).reverse()) cleanup()
  })
  afterAll(() => {
    template?.env.cleanup()
    template = undefined
  })
}

async function appliedTemplate(): Promise<Template> {
  const env = testEnv()
  const ctx = { store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }
  await applyNow(parseApplyText(readFileSync(ACME, 'utf8')), ctx)
  await applyNow(parseApplyText(EXTRA_PROJECTS), ctx)
  const { store } = env
  if (store.kind === 'sqlite') {
    return {
      env,
      copy: (base) => {
        const target = sqliteOf(base.store, 'a copy of the SQLite fixture')
        target.close()
        for (const suffix of ['', '-wal', '-shm']) rmSync(target.path + suffix, { force: true })
        store.sqlite.prepare('VACUUM INTO ?').run(target.path)
        const copy = openStore(base.dataDir)
        return withStore(base, copy, () => copy.close())
      },
    }
  }
  await store.close()
  const name = store.sql.options.database!
  return {
    env,
    copy: (base) => {
      const copy = postgresTestStore(name)
      return { ...withStore(base, copy.store, copy.close), databaseUrl: copy.url }
    },
  }
}

/** `base` on `store` instead of its own, `close` closing `store` before `base` is cleaned up. */
function withStore(base: TestEnv, store: TestStore, close: () => void): TestEnv {
  return {
    ...base,
    store,
    cleanup: () => {
      close()
      base.cleanup()
    },
  }
}

/** A fresh data dir and database holding the applied Acme fixture (+ Beta, Secure), with its own manual clock. */
export function fixture(vars: Record<string, string> = {}): TestEnv {
  if (!template) throw new Error('fixture() needs useFixtureCleanup() at the top level of the test file')
  const e = template.copy(testEnv(vars))
  cleanups.push(e.cleanup)
  return e
}

export function userId(e: TestEnv, email: string): number {
  return queryOne<{ id: number }>(e.store, 'SELECT id FROM users WHERE email = ?', email)!.id
}

/** The id of project `name` (support/acme.ts's lookup, on a test env). */
export const projectId = (e: TestEnv, name: string): number => projectIdOf(e.store, name)

/** A token straight through the service (the API paths are tested separately). */
export async function mint(
  e: TestEnv,
  email: string,
  options: { project?: string; scopes?: Scope[]; expiresAt?: number | null; createdWithSso?: boolean; name?: string } = {},
) {
  return await writeNow(e.store, function* () {
        return yield* createToken(e.clock, {
                    name: options.name ?? 'test',
                    userId: userId(e, email),
                    projectId: projectId(e, options.project ?? 'Acme'),
                    scopes: options.scopes ?? ['all'],
                    expiresAt: options.expiresAt ?? null,
                    createdWithSso: options.createdWithSso ?? false,
                    actorId: userId(e, email),
                    maxLiveTokens: e.config.liveTokensPerUser,
                  })
      },
  )
}

/** A console session cookie without the cost of a password check (login itself is tested below). */
export async function sessionCookie(e: TestEnv, email: string): Promise<string> {
  return `trellis_session=${(await runNow(e.store, createSession(e.clock, userId(e, email), false))).id}`
}

export async function login(app: ReturnType<typeof testApp>, email: string, password = PASSWORDS[email]!): Promise<Response> {
  return app.handle(request('/auth/login', { method: 'POST', json: { email, password } }))
}

export function cookieFrom(response: Response): string {
  const header = response.headers.get('set-cookie') ?? ''
  return header.split(';')[0]!
}


export function getNotes(app: ReturnType<typeof testApp>, headers: Record<string, string> = {}, path = NOTES) {
  return app.handle(request(path, { headers }))
}

export function postNote(app: ReturnType<typeof testApp>, headers: Record<string, string> = {}, json: unknown = NEW_NOTE, path = NOTES) {
  return app.handle(request(path, { method: 'POST', headers, json }))
}


export async function expect401(response: Response): Promise<ErrorObject> {
  const body = await expectErrorResponse(response, 401, 'unauthorized')
  expect(body.error).toBe('Unauthorized')
  return body
}

export async function expect403(response: Response, code?: string): Promise<ErrorObject> {
  const body = await expectErrorResponse(response, 403, code)
  expect(body.error).toBe('Forbidden')
  return body
}

export function lastUsedAt(e: TestEnv, tokenId: number): number | null {
  return queryOne<{ last_used_at: number | null }>(e.store, 'SELECT last_used_at FROM api_tokens WHERE id = ?', tokenId)!.last_used_at
}
