/**
 * PostgreSQL twins of sign-in (src/db/sessions.ts), tokens and the authentication queries (tokens.ts,
 * auth-queries.ts), apply's own queries (apply.ts) and log retention's delete (maintenance.ts): the same ops on
 * SQLite and PostgreSQL answer alike and leave the same rows. And, on PostgreSQL, no lookup cache: a revocation,
 * deactivation or role change made through one instance is seen by another instance's next request.
 */
import { describe, expect, test } from 'bun:test'
import { writeNow } from '../src/db/write.ts'
import { firstEditingTeamId, firstProjectAdminId, hasImportedNote, listProjectMemberEmails, listProjectNames, listUserEmails } from '../src/db/apply.ts'
import { findTokenByHash, touchTokenLastUsed } from '../src/db/auth-queries.ts'
import { deleteLogBatch } from '../src/db/maintenance.ts'
import { auditSigningKey } from '../src/lib/audit-key.ts'
import type { Op } from '../src/db/op.ts'
import {
  deleteExpiredSessions,
  deleteInstanceSetting,
  deleteSessionByHash,
  deleteSessionsOfUser,
  findSessionByHash,
  insertSession,
  readInstanceSetting,
  writeInstanceSetting,
} from '../src/db/sessions.ts'
import { findTokenById, insertTokenWithin, listTokenRows, lockLiveToken, revokeLiveToken, revokeTokensMadeBy, type NewTokenRow } from '../src/db/tokens.ts'
import { authorizeToken, TokenAuthenticator } from '../src/modules/auth/service.ts'
import { generateTokenValue, hashTokenValue } from '../src/lib/token-value.ts'
import { manualClock } from '../src/lib/clock.ts'
import type { Micros } from '../src/lib/time.ts'
import { alike, bothStores, postgresOrSkip } from './support/both-stores.ts'
import { freshDatabase, openProductPostgres } from './support/postgres-cluster.ts'
import { SEEDED_AT, seedOrganization } from './support/seed-both.ts'

/** What retention signs its anchors with: a key of its own, witnessed nowhere. */
const TEST_SIGNING = { key: auditSigningKey(Buffer.from('twins-test-secret-0123456789abcdef')), witnesses: [] }

const T = SEEDED_AT
const HOUR = 3_600_000

function* each<T>(ops: Op<T>[]): Op<T[]> {
  const answers: T[] = []
  for (const work of ops) answers.push(yield* work)
  return answers
}

describe.skipIf(!postgresOrSkip('sessions twins'))('sessions and instance settings twins', () => {
  const stores = bothStores()
  const hashes = ['s-live', 's-sso', 's-expired', 's-disabled', 's-other', 's-edge']
  const sessionsNow = () => each(hashes.concat('s-unknown').map((h) => findSessionByHash(h)))

  test('sessions: inserted, found with their user, expired swept, deleted by hash and by user', async () => {
    await seedOrganization(stores)
    await alike(stores, [
      () => insertSession({ idHash: 's-live', userId: 2, viaSso: false, createdAt: T, expiresAt: T + 10 * HOUR }),
      () => insertSession({ idHash: 's-sso', userId: 1, viaSso: true, createdAt: T, expiresAt: T + 10 * HOUR }),
      () => insertSession({ idHash: 's-expired', userId: 2, viaSso: false, createdAt: T - 2 * HOUR, expiresAt: T - HOUR }),
      () => insertSession({ idHash: 's-disabled', userId: 3, viaSso: false, createdAt: T, expiresAt: T + HOUR }),
      () => insertSession({ idHash: 's-other', userId: 4, viaSso: true, createdAt: T, expiresAt: T + HOUR }),
      () => insertSession({ idHash: 's-edge', userId: 4, viaSso: false, createdAt: T, expiresAt: T }),
    ])
    const [found] = await alike(stores, [sessionsNow])
    expect(found!.map((s) => s?.viaSso)).toEqual([false, true, false, false, true, false, undefined])
    expect(found![1]!.user).toMatchObject({ id: 1, email: 'carol@example.com', isInstanceAdmin: true, passwordHash: 'hash-c' })
    expect(found![3]!.user.disabledAt).toBe(T + 5)

    // Expired before `now` goes; expiring exactly at `now` stays (lt).
    await alike(stores, [() => deleteExpiredSessions(T)])
    const [swept] = await alike(stores, [sessionsNow])
    expect(swept!.map((s) => s !== undefined)).toEqual([true, true, false, true, true, true, false])

    await alike(stores, [() => deleteSessionByHash('s-live'), () => deleteSessionByHash('s-unknown'), () => deleteSessionsOfUser(4)])
    const [left] = await alike(stores, [sessionsNow])
    expect(left!.map((s) => s !== undefined)).toEqual([false, true, false, true, false, false, false])
  })

  test('instance settings: missing, written, overwritten, deleted', async () => {
    const [answers] = await alike(stores, [
      () =>
        each<unknown>([
          readInstanceSetting('sso'),
          writeInstanceSetting('sso', '{"issuer":"a"}', T),
          readInstanceSetting('sso'),
          writeInstanceSetting('sso', '{"issuer":"b"}', T + 1),
          writeInstanceSetting('other', 'x', T),
          readInstanceSetting('sso'),
          deleteInstanceSetting('sso'),
          deleteInstanceSetting('never'),
          readInstanceSetting('sso'),
          readInstanceSetting('other'),
        ]),
    ])
    expect(answers).toEqual([undefined, undefined, '{"issuer":"a"}', undefined, undefined, '{"issuer":"b"}', undefined, undefined, undefined, 'x'])
    const rows = 'SELECT name, value, updated_at FROM instance_settings ORDER BY name'
    expect([...(await stores.pg.sql.unsafe(rows.replace('updated_at', 'updated_at::float8 AS updated_at')))]).toEqual(
      stores.sqlite.store.sqlite.prepare(rows).all(),
    )
  })
})

describe.skipIf(!postgresOrSkip('tokens twins'))('tokens and authentication twins', () => {
  const stores = bothStores()
  const token = (name: string, userId: number, projectId: number, extra: Partial<NewTokenRow> = {}): NewTokenRow => ({
    name,
    userId,
    projectId,
    tokenHash: `hash-${name}`,
    prefix: `trl_${name}`.slice(0, 12),
    scopes: '["notes:read"]',
    createdWithSso: false,
    createdAt: T,
    expiresAt: null,
    ...extra,
  })

  test('tokens: inserted, found by id, revoked once, listed with every filter', async () => {
    await seedOrganization(stores)
    const inserted = await alike(stores, [
      () => insertTokenWithin(token('admin', 2, 1), 100),
      () => insertTokenWithin(token('editor', 1, 1, { scopes: '["all"]', expiresAt: T + HOUR }), 100),
      () => insertTokenWithin(token('disabled', 3, 1), 100),
      () => insertTokenWithin(token('sso', 6, 2, { createdWithSso: true }), 100),
      () => insertTokenWithin(token('not-member', 4, 3), 100),
      () => insertTokenWithin(token('revoked', 2, 1), 100),
      () => insertTokenWithin(token('expired', 2, 2, { expiresAt: T - 1 }), 100),
    ])
    expect(inserted.map((t) => t!.id)).toEqual([1, 2, 3, 4, 5, 6, 7])
    expect(inserted[1]).toMatchObject({ createdWithSso: false, expiresAt: T + HOUR, revokedAt: null, lastUsedAt: null })

    const [revocations] = await alike(stores, [
      () => each([revokeLiveToken(6, T + 1), revokeLiveToken(6, T + 2), revokeLiveToken(99, T + 3)]),
    ])
    expect(revocations).toEqual([true, false, false])
    const [byId] = await alike(stores, [() => each([findTokenById(6), findTokenById(4), findTokenById(99)])])
    expect(byId![0]!.revokedAt).toBe(T + 1)
    expect(byId![2]).toBeUndefined()

    const lists = await alike(stores, [
      () => listTokenRows({}),
      () => listTokenRows({ includeRevoked: true }),
      () => listTokenRows({ userId: 2 }),
      () => listTokenRows({ userId: 2, includeRevoked: true }),
      () => listTokenRows({ projectId: 1 }),
      () => listTokenRows({ userId: 2, projectId: 2, includeRevoked: false }),
      () => listTokenRows({ userId: 5 }),
    ])
    expect(lists.map((l) => l.map((r) => r.token.id))).toEqual([[7, 5, 4, 3, 2, 1], [7, 6, 5, 4, 3, 2, 1], [7, 1], [7, 6, 1], [3, 2, 1], [7], []])
    expect(lists[0]![2]).toMatchObject({ projectName: 'Beta', owner: { id: 6, email: 'Zed@example.com', username: 'Zed' } })
  })

  test('the token lookup by hash: role or none, SSO project, deactivated user, revoked, expired, unknown', async () => {
    const names = ['admin', 'editor', 'disabled', 'sso', 'not-member', 'revoked', 'expired', 'unknown']
    const [rows] = await alike(stores, [() => each(names.map((n) => findTokenByHash(`hash-${n}`)))])
    expect(rows!.map((r) => r?.role)).toEqual(['admin', 'editor', 'admin', 'admin', null, 'admin', null, undefined])
    expect(rows![3]).toMatchObject({ createdWithSso: true, projectSso: true, projectName: 'Beta', scopes: '["notes:read"]' })
    expect(rows![0]).toMatchObject({ createdWithSso: false, projectSso: false, disabledAt: null, lastUsedAt: null, tokenId: 1 })
    expect(rows![2]!.disabledAt).toBe(T + 5)
    expect(rows![5]!.revokedAt).toBe(T + 1)
    expect(rows![6]!.expiresAt).toBe(T - 1)
  })

  test('lastUsedAt: stamped when never stamped or stamped at or before `before`, kept otherwise', async () => {
    const minute = 60_000
    const stamp = (id: number, now: number) => () => each<unknown>([touchTokenLastUsed(id, now, now - minute), findTokenById(id)])
    const answers = await alike(stores, [
      stamp(1, T + 10 * minute), // never stamped: stamped
      stamp(1, T + 10 * minute + 30_000), // within the resolution: kept
      stamp(1, T + 11 * minute), // exactly one resolution later (<= before): stamped
      stamp(1, T + 11 * minute + 59_999), // kept
      stamp(99, T), // unknown token: nothing
    ])
    expect(answers.map((a) => (a[1] as { lastUsedAt: number } | undefined)?.lastUsedAt)).toEqual([
      T + 10 * minute,
      T + 10 * minute,
      T + 11 * minute,
      T + 11 * minute,
      undefined,
    ])
    const [row] = await alike(stores, [() => findTokenByHash('hash-admin')])
    expect(row!.lastUsedAt).toBe(T + 11 * minute)
  })

  test("tokens made by tokens: a live maker's expiry (none when revoked, expired or unknown); what it made revoked to the end, through live tokens", async () => {
    const made = await alike(stores, [
      () => insertTokenWithin(token('maker', 2, 1, { expiresAt: T + HOUR }), 100),
      () => insertTokenWithin(token('child', 2, 1, { expiresAt: T + HOUR, parentTokenId: 8 }), 100),
      () => insertTokenWithin(token('grandchild', 2, 1, { expiresAt: T + 30, parentTokenId: 9 }), 100),
      () => insertTokenWithin(token('sibling', 2, 1, { parentTokenId: 8 }), 100),
      () => insertTokenWithin(token('other', 2, 1, { parentTokenId: 1 }), 100),
    ])
    expect(made.map((t) => [t!.id, t!.parentTokenId])).toEqual([[8, null], [9, 8], [10, 9], [11, 8], [12, 1]])
    const [locked] = await alike(stores, [() => each([8, 1, 6, 7, 99].map((id) => lockLiveToken(id, T)))])
    expect(locked).toEqual([{ expiresAt: T + HOUR }, { expiresAt: null }, undefined, undefined, undefined])
    // Expired exactly at `now`: no longer live.
    const [atExpiry] = await alike(stores, [() => lockLiveToken(8, T + HOUR)])
    expect(atExpiry).toBeUndefined()
    // The sibling revoked on its own first: it is not revoked again.
    await alike(stores, [() => revokeLiveToken(11, T + 5)])
    const [revoked] = await alike(stores, [() => each([revokeTokensMadeBy(8, T + 9), revokeTokensMadeBy(8, T + 10), revokeTokensMadeBy(99, T)])])
    expect(revoked!.map((rows) => rows.map((t) => [t.id, t.revokedAt]))).toEqual([[[9, T + 9], [10, T + 9]], [], []])
    const [after] = await alike(stores, [() => each([8, 11, 12].map((id) => findTokenById(id)))])
    expect(after!.map((t) => t!.revokedAt)).toEqual([null, T + 5, null])
  })

  test('the live-token bound counts the live tokens of the user only: neither revoked nor expired at the new one\'s createdAt', async () => {
    // User 3 holds `disabled` (live); user 4 holds `not-member` (live). A revoked and an expired token of user 3 do not count.
    await alike(stores, [() => insertTokenWithin(token('gone', 3, 1), 100)])
    await alike(stores, [() => revokeLiveToken(13, T + 1)])
    await alike(stores, [() => insertTokenWithin(token('old', 3, 1, { expiresAt: T + 10 }), 100)])
    const [atTen] = await alike(stores, [() => insertTokenWithin(token('at-ten', 3, 1, { createdAt: T + 10 }), 2)])
    expect(atTen).toMatchObject({ id: 15, userId: 3 })
    const [full, other] = await alike(stores, [() => insertTokenWithin(token('full', 3, 1, { createdAt: T + 10 }), 2), () => insertTokenWithin(token('elsewhere', 4, 3, { createdAt: T + 10 }), 2)])
    expect(full).toBeUndefined()
    expect(other).toMatchObject({ id: 16, userId: 4 })
  })
})

describe.skipIf(!postgresOrSkip('apply twins'))("apply's queries and log retention twins", () => {
  const stores = bothStores()

  test('emails, names and members in the same order; first admin, first editing team, imported notes', async () => {
    await seedOrganization(stores)
    const [emails, names, members, noMembers] = (await alike<unknown>(stores, [
      () => listUserEmails(),
      () => listProjectNames(),
      () => listProjectMemberEmails(1),
      () => listProjectMemberEmails(3),
    ])) as string[][]
    expect(emails).toEqual(['Zed@example.com', 'a-b@example.com', 'a_b@example.com', 'alice@example.com', 'bob@example.com', 'carol@example.com'])
    expect(names).toEqual(['Beta', 'Zeta', 'alpha', 'beta-2'])
    expect(members).toEqual(['carol@example.com', 'alice@example.com', 'bob@example.com', 'a-b@example.com'])
    expect(noMembers).toEqual([])

    const [admins] = await alike(stores, [() => each([firstProjectAdminId(1), firstProjectAdminId(2), firstProjectAdminId(3)])])
    expect(admins).toEqual([2, 6, undefined])
    const [teams] = await alike(stores, [
      () => each([firstEditingTeamId(1, 1), firstEditingTeamId(1, 2), firstEditingTeamId(2, 3), firstEditingTeamId(3, 1)]),
    ])
    expect(teams).toEqual([2, 3, 4, undefined])

    const key = { environmentId: 1, recordId: 'r1', userId: 2, title: 'Imported' }
    const [imported] = await alike(stores, [
      () =>
        each([
          hasImportedNote(key),
          hasImportedNote({ ...key, createdAt: 1700000000000000 as Micros }),
          hasImportedNote({ ...key, createdAt: 1700000000000001 as Micros }),
          hasImportedNote({ ...key, title: 'imported' }),
          hasImportedNote({ ...key, environmentId: 2 }),
        ]),
    ])
    expect(imported).toEqual([true, true, false, false, false])
  })

  test('log retention deletes the oldest ids before the cutoff, a batch at a time', async () => {
    const remaining = async (table: string) => {
      const text = `SELECT id FROM ${table} ORDER BY id`
      const sqlite = (stores.sqlite.store.sqlite.prepare(text).all() as { id: number }[]).map((r) => r.id)
      const pg = ((await stores.pg.sql.unsafe(`SELECT id::float8 AS id FROM ${table} ORDER BY id`)) as { id: number }[]).map((r) => r.id)
      expect(pg).toEqual(sqlite)
      return sqlite
    }
    const cutoff = 10 as Micros
    expect(await stores.pg.awaitListed('activity_logs')).toBe(true) // PostgreSQL's retention cuts listed entries only
    const batches = await alike(stores, [
      () => deleteLogBatch('activity_logs', cutoff, 2, TEST_SIGNING, 0),
      () => deleteLogBatch('activity_logs', cutoff, 2, TEST_SIGNING, 0),
      () => deleteLogBatch('activity_logs', cutoff, 2, TEST_SIGNING, 0),
      () => deleteLogBatch('admin_logs', cutoff, 10, TEST_SIGNING, 0),
      () => deleteLogBatch('admin_logs', cutoff, 10, TEST_SIGNING, 0),
    ])
    expect(batches).toEqual([2, 2, 1, 3, 0])
    expect(await remaining('activity_logs')).toEqual([4, 6])
    expect(await remaining('admin_logs')).toEqual([2, 5])
  })
})

describe.skipIf(!postgresOrSkip('token lookups across instances'))('no lookup cache on PostgreSQL: every instance sees a change at once', () => {
  test("a token revoked, its user deactivated or its role changed through one instance is refused by the other's next request", async () => {
    const url = await freshDatabase()
    const [one, two] = [openProductPostgres(url), openProductPostgres(url)]
    try {
      const clock = manualClock(T)
      const [a, b] = [new TokenAuthenticator(one, clock), new TokenAuthenticator(two, clock)]
      await one.sql.unsafe(`INSERT INTO users (email, username, created_at, updated_at) VALUES ('u@example.com', 'u', ${T}, ${T})`)
      await one.sql.unsafe(`INSERT INTO projects (name, created_at) VALUES ('p', ${T})`)
      await one.sql.unsafe(`INSERT INTO project_members (project_id, user_id, role, created_at, updated_at) VALUES (1, 1, 'admin', ${T}, ${T})`)
      const values = [generateTokenValue(), generateTokenValue()]
      for (const [i, value] of values.entries()) {
        const row = { name: `t${i}`, userId: 1, projectId: 1, tokenHash: hashTokenValue(value), prefix: value.slice(0, 12), scopes: '["all"]', createdWithSso: false, createdAt: T, expiresAt: null }
        await writeNow(one, () => insertTokenWithin(row, 100))
      }
      const bearerOf = (value: string) => `Bearer ${value}`
      const need = { scope: 'notes:read', role: 'admin' } as const
      // Both instances accept it, many times over (nothing is remembered between requests).
      for (let i = 0; i < 3; i++) for (const auth of [a, b]) authorizeToken(await auth.authenticate(bearerOf(values[0]!)), 'p', need)

      await one.sql.unsafe(`UPDATE project_members SET role = 'editor' WHERE user_id = 1`)
      const demoted = await b.authenticate(bearerOf(values[0]!))
      expect(demoted.role).toBe('editor')
      expect(() => authorizeToken(demoted, 'p', need)).toThrow(/admin role/)

      await one.sql.unsafe(`UPDATE users SET disabled_at = ${T} WHERE id = 1`)
      const deactivated = await b.authenticate(bearerOf(values[0]!))
      expect(() => authorizeToken(deactivated, 'p')).toThrow(/not authorized for the organization/)

      expect(await writeNow(one, () => revokeLiveToken(1, T))).toBe(true)
      await expect(b.authenticate(bearerOf(values[0]!))).rejects.toThrow(/revoked/)
      await expect(a.authenticate(bearerOf(values[0]!))).rejects.toThrow(/revoked/)
      // The other token is still found (its user's deactivation is refused by authorizeToken, as above).
      expect((await b.authenticate(bearerOf(values[1]!))).tokenId).toBe(2)
    } finally {
      await Promise.all([one.close(), two.close()])
    }
  })
})
