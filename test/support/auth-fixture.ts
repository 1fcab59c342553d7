/**
 * The fixture of test/auth.test.ts and test/tokens.test.ts: examples/acme.yaml (+ a second project Beta and an SSO
 * project Secure) applied once, then every test gets its own copy of the database file (VACUUM INTO) in its own
 * temp dir with its own manual clock; tokens and sessions straight through the services; DESIGN §5 error checks
 * on a raw Response. A file using `fixture()` calls `useFixtureCleanup()` once at its top level.
 */
import { afterAll, afterEach, expect } from 'bun:test'
import { readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { openStore } from '../../src/db/open.ts'
import { commitNow } from '../../src/db/write.ts'
import { applyDocumentNow, parseApplyText } from '../../src/modules/apply/service.ts'
import { createSession } from '../../src/modules/auth/sessions.ts'
import { createToken, type Scope } from '../../src/modules/tokens/service.ts'
import { repoRoot, request, testApp, testEnv, type TestEnv, runNow } from '../helpers.ts'
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
// Applying the yaml hashes four argon2id passwords (~1 s): do it once, then give every test its own copy
// of the database file (VACUUM INTO) in its own temp dir.

let template: TestEnv | undefined
/** Run (newest first) after each test of a file that called `useFixtureCleanup`. */
export const cleanups: (() => void)[] = []
/** Registers the hooks that remove each test's copy and, at the end, the template. */
export function useFixtureCleanup(): void {
  afterEach(() => {
    for (const cleanup of cleanups.splice(0).reverse()) cleanup()
  })
  afterAll(() => {
    template?.cleanup()
    template = undefined
  })
}

export function templateEnv(): TestEnv {
  if (!template) {
    const e = testEnv()
    const ctx = { store: e.store, clock: e.clock, secret: e.secret, baseUrl: e.config.baseUrl }
    applyDocumentNow(parseApplyText(readFileSync(ACME, 'utf8')), ctx)
    applyDocumentNow(parseApplyText(EXTRA_PROJECTS), ctx)
    template = e
  }
  return template
}

/** Copies the applied fixture database into `path` (which must not exist yet). */
export function copyFixtureTo(path: string): void {
  templateEnv().store.sqlite.prepare('VACUUM INTO ?').run(path)
}

/** A fresh data dir holding the applied Acme fixture (+ Beta, Secure), with its own manual clock. */
export function fixture(vars: Record<string, string> = {}): TestEnv {
  const base = testEnv(vars)
  base.store.close()
  for (const suffix of ['', '-wal', '-shm']) rmSync(base.store.path + suffix, { force: true })
  copyFixtureTo(base.store.path)
  const store = openStore(base.dataDir)
  const e: TestEnv = {
    ...base,
    store,
    cleanup: () => {
      store.close()
      base.cleanup()
    },
  }
  cleanups.push(e.cleanup)
  return e
}

export function userId(e: TestEnv, email: string): number {
  return (e.store.sqlite.prepare('SELECT id FROM users WHERE email = ?').get(email) as { id: number }).id
}

/** The id of project `name` (support/acme.ts's lookup, on a test env). */
export const projectId = (e: TestEnv, name: string): number => projectIdOf(e.store, name)

/** A token straight through the service (the API paths are tested separately). */
export function mint(
  e: TestEnv,
  email: string,
  options: { project?: string; scopes?: Scope[]; expiresAt?: number | null; createdWithSso?: boolean; name?: string } = {},
) {
  return commitNow(e.store, function* () {
        return yield* createToken(e.clock, {
                    name: options.name ?? 'test',
                    userId: userId(e, email),
                    projectId: projectId(e, options.project ?? 'Acme'),
                    scopes: options.scopes ?? ['all'],
                    expiresAt: options.expiresAt ?? null,
                    createdWithSso: options.createdWithSso ?? false,
                    actorId: userId(e, email),
                  })
      },
  )
}

/** A console session cookie without the cost of a password check (login itself is tested below). */
export function sessionCookie(e: TestEnv, email: string): string {
  return `trellis_session=${(runNow(e.store, createSession(e.clock, userId(e, email), false))).id}`
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
  return (e.store.sqlite.prepare('SELECT last_used_at FROM api_tokens WHERE id = ?').get(tokenId) as { last_used_at: number | null }).last_used_at
}
