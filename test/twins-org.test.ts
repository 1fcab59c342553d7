/**
 * The organization modules' PostgreSQL twins (src/db/postgres/projects.ts, members.ts, users.ts) answer
 * exactly what their SQLite functions answer. Both stores are seeded through the face's own inserts, in the same
 * order, then every read is compared (found, not found, counts with their exclusions, lists with mixed-case and
 * non-ASCII names) and every write is compared by the rows it leaves. The PostgreSQL name columns are switched to an
 * ICU collation first, so a list that sorted by the cluster's locale instead of byte order would be caught. Last, the
 * conflict path: two instances' check-then-insert racing on one email or one name end in the service's 409.
 */
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { writeNow } from '../src/db/write.ts'
import type { Op } from '../src/db/op.ts'
import { runOpOnPostgres, sqlStateOf } from '../src/db/postgres/op-runner.ts'
import type { PgStore } from '../src/db/postgres/store.ts'
import * as members from '../src/db/members.ts'
import * as projects from '../src/db/projects.ts'
import * as users from '../src/db/users.ts'
import { HttpError, conflict } from '../src/lib/errors.ts'
import type { PermissionLevel } from '../src/lib/access.ts'
import { findUserByEmail, insertUser } from '../src/modules/users/service.ts'
import { bothStores, postgresOrSkip } from './support/both-stores.ts'

const T0 = Date.UTC(2026, 10, 21, 12)

// This file's hooks and tests: the harness's fresh database (the cluster itself when this file is the first to need
// it) took more than the default 5 s under the whole suite on a loaded 2-core machine.
setDefaultTimeout(30_000)

describe.skipIf(!postgresOrSkip('organization twins'))('organization twins (projects, members, users)', () => {
  const stores = bothStores()

  /** The op on both stores; the answers must be identical (undefined stays undefined); SQLite's answer. */
  async function same<T>(body: () => Op<T>): Promise<T> {
    const [sqlite, pg] = await stores.both(body)
    expect(pg).toStrictEqual(sqlite)
    return sqlite
  }

  /** The PostgreSQL name columns under a locale-aware collation: only `COLLATE "C"` in the twins keeps byte order. */
  test('setup: name columns use an ICU collation on PostgreSQL', async () => {
    const [icu] = (await stores.pg.sql`SELECT collname FROM pg_collation WHERE collname = 'und-x-icu'`) as { collname: string }[]
    if (!icu) return console.warn('no ICU collation in this PostgreSQL build: byte order checked under the cluster locale only')
    for (const [table, column] of [['users', 'email'], ['projects', 'name'], ['teams', 'name'], ['environments', 'name'], ['collections', 'name']]) {
      await stores.pg.sql.unsafe(`ALTER TABLE ${table} ALTER COLUMN ${column} TYPE text COLLATE "und-x-icu"`)
    }
    const [probe] = (await stores.pg.sql`SELECT array_agg(n ORDER BY n)::text AS plain FROM (VALUES ('b'::text COLLATE "und-x-icu"), ('B'), ('a')) v(n)`) as { plain: string }[]
    expect(probe!.plain).toBe('{a,b,B}') // the locale's order, not bytes ({B,a,b})
  })

  const user = (email: string, extra: { isInstanceAdmin?: boolean; disabledAt?: number | null; passwordHash?: string | null } = {}) =>
    users.insertUserRow({ email, username: email.split('@')[0]!, passwordHash: extra.passwordHash ?? null, isInstanceAdmin: extra.isInstanceAdmin ?? false, disabledAt: extra.disabledAt ?? null, now: T0 })

  const ids: Record<string, number> = {}

  test('users: inserts, lookups by id and stored email, counts, the list by email in byte order', async () => {
    expect(await same(() => users.countAllUsers())).toBe(0)
    expect(await same(() => users.allUsersByEmail())).toEqual([])
    const seeded: [string, Parameters<typeof user>[1]][] = [
      ['zoe@example.test', { isInstanceAdmin: true, passwordHash: '$argon2id$zoe' }],
      ['Bob@example.test', { isInstanceAdmin: true }],
      ['émile@example.test', { isInstanceAdmin: true, disabledAt: T0 + 5 }],
      ['adam@example.test', {}],
      ['bob@example.test', {}],
    ]
    for (const [email, extra] of seeded) {
      const row = await same(() => user(email, extra))
      ids[email] = row.id
    }
    expect(Object.values(ids)).toEqual([1, 2, 3, 4, 5])
    expect(await same(() => users.countAllUsers())).toBe(5)
    const list = await same(() => users.allUsersByEmail())
    expect(list.map((u) => u.email)).toEqual(['Bob@example.test', 'adam@example.test', 'bob@example.test', 'zoe@example.test', 'émile@example.test'])
    expect(list[0]!.isInstanceAdmin).toBe(true)

    expect((await same(() => users.findUserById(1)))?.email).toBe('zoe@example.test')
    expect(await same(() => users.findUserById(99))).toBeUndefined()
    expect((await same(() => users.findUserByStoredEmail('émile@example.test')))?.id).toBe(3)
    expect(await same(() => users.findUserByStoredEmail('BOB@example.test'))).toBeUndefined() // exact, case-sensitive
    expect((await same(() => users.findUserByStoredEmail('bob@example.test')))?.id).toBe(5)
  })

  test('users: other active instance admins (the disabled one and the user themself excluded)', async () => {
    // Admins: 1 and 2 active, 3 disabled; 4 and 5 are not admins.
    expect(await same(() => users.countOtherActiveInstanceAdmins(1))).toBe(1)
    expect(await same(() => users.countOtherActiveInstanceAdmins(3))).toBe(2)
    expect(await same(() => users.countOtherActiveInstanceAdmins(4))).toBe(2)
    expect(await same(() => users.countOtherActiveInstanceAdmins(99))).toBe(2)
    await same(() => users.updateUser(2, T0 + 10, { isInstanceAdmin: false }))
    expect(await same(() => users.countOtherActiveInstanceAdmins(1))).toBe(0) // the last one
    await same(() => users.updateUser(3, T0 + 11, { disabledAt: null }))
    expect(await same(() => users.countOtherActiveInstanceAdmins(1))).toBe(1)
  })

  test('users: updates change only the given fields and stamp updatedAt', async () => {
    await same(() => users.updateUser(4, T0 + 20, { username: 'Ádám', passwordHash: '$argon2id$adam' }))
    await same(() => users.updateUser(5, T0 + 21, { disabledAt: T0 + 21 }))
    await same(() => users.updateUser(98, T0 + 22, { username: 'nobody' })) // unknown: nothing changes
    const rows = await same(() => users.allUsersByEmail())
    expect(rows.find((u) => u.id === 4)).toMatchObject({ username: 'Ádám', passwordHash: '$argon2id$adam', updatedAt: T0 + 20, createdAt: T0 })
    expect(rows.find((u) => u.id === 5)).toMatchObject({ disabledAt: T0 + 21, updatedAt: T0 + 21 })
  })

  test('invitations: insert, find by hash, spend one, spend all of a user', async () => {
    const invite = (tokenHash: string, userId: number, createdBy: number | null, at: number) =>
      users.insertInvitation({ tokenHash, userId, createdBy, createdAt: at, expiresAt: at + 86_400_000 })
    await same(() => invite('hash-a', 4, 1, T0 + 30))
    await same(() => invite('hash-b', 4, null, T0 + 31))
    await same(() => invite('hash-c', 5, 1, T0 + 32))
    expect(await same(() => users.findInvitationByHash('hash-a'))).toMatchObject({ id: 1, userId: 4, createdBy: 1, usedAt: null })
    expect(await same(() => users.findInvitationByHash('hash-b'))).toMatchObject({ id: 2, createdBy: null })
    expect(await same(() => users.findInvitationByHash('nope'))).toBeUndefined()
    await same(() => users.spendInvitation(1, T0 + 40))
    await same(() => users.spendUserInvitations(4, T0 + 41)) // only the unused one of user 4
    await same(() => users.spendInvitation(99, T0 + 42))
    expect((await same(() => users.findInvitationByHash('hash-a')))?.usedAt).toBe(T0 + 40)
    expect((await same(() => users.findInvitationByHash('hash-b')))?.usedAt).toBe(T0 + 41)
    expect((await same(() => users.findInvitationByHash('hash-c')))?.usedAt).toBeNull()
  })

  test('projects: none yet, then inserts; found by exact name; the list by name in byte order', async () => {
    expect(await same(() => projects.anyProjectExists())).toBe(false)
    expect(await same(() => projects.allProjectsByName())).toEqual([])
    for (const [name, sso] of [['beta', false], ['Alpha', true], ['alpha', false], ['Ärger', false], ['zeta', true]] as const) {
      const project = await same(() => projects.insertProject({ name, sso, createdAt: T0 + 50 }))
      ids[`project:${name}`] = project.id
    }
    expect(await same(() => projects.anyProjectExists())).toBe(true)
    expect((await same(() => projects.allProjectsByName())).map((p) => p.name)).toEqual(['Alpha', 'alpha', 'beta', 'zeta', 'Ärger'])
    expect(await same(() => projects.findProjectByName('Alpha'))).toStrictEqual({ id: 2, name: 'Alpha', sso: true, createdAt: T0 + 50 })
    expect(await same(() => projects.findProjectByName('ALPHA'))).toBeUndefined()
    expect((await same(() => projects.findProjectByName('Ärger')))?.id).toBe(4)
  })

  test('projects: rename and SSO change', async () => {
    await same(() => projects.updateProject(1, { name: 'Beta' }))
    await same(() => projects.updateProject(5, { sso: false }))
    await same(() => projects.updateProject(42, { name: 'ghost' }))
    expect(await same(() => projects.findProjectByName('beta'))).toBeUndefined()
    expect(await same(() => projects.findProjectByName('Beta'))).toMatchObject({ id: 1, sso: false })
    expect(await same(() => projects.findProjectByName('zeta'))).toMatchObject({ id: 5, sso: false })
    expect((await same(() => projects.allProjectsByName())).map((p) => p.name)).toEqual(['Alpha', 'Beta', 'alpha', 'zeta', 'Ärger'])
  })

  test('parts: environments, teams and collections added, found by name, renamed', async () => {
    const parts: [projects.ProjectPart, number, string][] = [
      ['environment', 1, 'production'],
      ['environment', 1, 'Production'],
      ['environment', 2, 'production'],
      ['team', 1, 'support'],
      ['team', 1, 'Sales'],
      ['team', 1, 'ñandú'],
      ['team', 1, 'billing'],
      ['team', 2, 'support'],
      ['collection', 1, 'tickets'],
      ['collection', 1, 'Tickets'],
    ]
    for (const [part, projectId, name] of parts) ids[`${part}:${projectId}:${name}`] = await same(() => projects.insertPart(part, { projectId, name, createdAt: T0 + 60 }))
    expect(ids['environment:2:production']).toBe(3)
    expect(ids['team:2:support']).toBe(5)

    expect(await same(() => projects.findEnvironmentByName(1, 'Production'))).toStrictEqual({ id: 2, projectId: 1, name: 'Production', notesInTimeOrder: true, createdAt: T0 + 60 })
    expect(await same(() => projects.findEnvironmentByName(2, 'Production'))).toBeUndefined()
    expect(await same(() => projects.findEnvironmentByName(99, 'production'))).toBeUndefined()
    expect(await same(() => projects.findTeamByName(1, 'ñandú'))).toStrictEqual({ id: 3, projectId: 1, name: 'ñandú', createdAt: T0 + 60 })
    expect(await same(() => projects.findTeamByName(2, 'support'))).toMatchObject({ id: 5 })
    expect(await same(() => projects.findTeamByName(2, 'sales'))).toBeUndefined()
    expect(await same(() => projects.findCollectionByName(1, 'Tickets'))).toMatchObject({ id: 2 })
    expect(await same(() => projects.findCollectionByName(2, 'tickets'))).toBeUndefined()
    for (const part of ['environment', 'team', 'collection'] as const) {
      expect(await same(() => projects.findPartByName(part, 1, 'nothing'))).toBeUndefined()
    }
    expect(await same(() => projects.findPartByName('environment', 2, 'production'))).toStrictEqual({ id: 3, name: 'production' })
    expect(await same(() => projects.findPartByName('team', 1, 'Sales'))).toStrictEqual({ id: 2, name: 'Sales' })
    expect(await same(() => projects.findPartByName('collection', 1, 'tickets'))).toStrictEqual({ id: 1, name: 'tickets' })

    await same(() => projects.renamePart('environment', 3, 'live'))
    await same(() => projects.renamePart('team', 4, 'Billing'))
    await same(() => projects.renamePart('collection', 2, 'archive'))
    expect(await same(() => projects.findPartByName('environment', 2, 'live'))).toStrictEqual({ id: 3, name: 'live' })
    expect(await same(() => projects.findPartByName('environment', 2, 'production'))).toBeUndefined()
    expect(await same(() => projects.findTeamByName(1, 'Billing'))).toMatchObject({ id: 4 })
    expect(await same(() => projects.findCollectionByName(1, 'archive'))).toMatchObject({ id: 2 })
    // An environment rename leaves the other environment of that name alone.
    expect(await same(() => projects.findEnvironmentByName(1, 'production'))).toMatchObject({ id: 1 })
  })

  test('collection permissions: none (the default), a new row, the row changed', async () => {
    expect(await same(() => projects.findCollectionPermission(1, 1))).toBeUndefined()
    await same(() => projects.writeCollectionPermission({ collectionId: 1, teamId: 1, canRead: true, canEdit: false }, false))
    await same(() => projects.writeCollectionPermission({ collectionId: 1, teamId: 2, canRead: false, canEdit: false }, false))
    expect(await same(() => projects.findCollectionPermission(1, 1))).toStrictEqual({ collectionId: 1, teamId: 1, canRead: true, canEdit: false })
    await same(() => projects.writeCollectionPermission({ collectionId: 1, teamId: 1, canRead: false, canEdit: false }, true))
    expect(await same(() => projects.findCollectionPermission(1, 1))).toStrictEqual({ collectionId: 1, teamId: 1, canRead: false, canEdit: false })
    expect(await same(() => projects.findCollectionPermission(1, 2))).toStrictEqual({ collectionId: 1, teamId: 2, canRead: false, canEdit: false })
    expect(await same(() => projects.findCollectionPermission(2, 1))).toBeUndefined()
  })

  test('project members: inserted out of id order, roles, lookups and lists', async () => {
    const member = (projectId: number, userId: number, role: PermissionLevel, at: number) => members.insertProjectMember({ projectId, userId, role, now: at })
    // User 4 joins project 5 before projects 3 and 1: the ids still come back ascending.
    await same(() => member(5, 4, 'user', T0 + 70))
    await same(() => member(3, 4, 'editor', T0 + 71))
    await same(() => member(1, 4, 'admin', T0 + 72))
    await same(() => member(1, 1, 'admin', T0 + 73))
    await same(() => member(1, 5, 'editor', T0 + 74))
    await same(() => member(1, 2, 'user', T0 + 75))
    await same(() => member(1, 3, 'admin', T0 + 76))
    await same(() => member(2, 1, 'admin', T0 + 77))

    expect(await same(() => members.projectIdsOfMember(4))).toEqual([1, 3, 5])
    expect(await same(() => members.projectIdsOfMember(99))).toEqual([])
    // Project 1 is now named 'Beta', 3 'alpha', 5 'zeta': byte order puts 'Beta' first.
    expect(await same(() => members.projectsOfMember(4))).toEqual([
      { name: 'Beta', role: 'admin' },
      { name: 'alpha', role: 'editor' },
      { name: 'zeta', role: 'user' },
    ])
    expect(await same(() => members.projectsOfMember(99))).toEqual([])
    expect((await same(() => members.membersOfProject(1))).map((m) => m.email)).toEqual([
      'Bob@example.test',
      'adam@example.test',
      'bob@example.test',
      'zoe@example.test',
      'émile@example.test',
    ])
    expect(await same(() => members.membersOfProject(4))).toEqual([])

    expect(await same(() => members.findMemberRole(1, 5))).toBe('editor')
    expect(await same(() => members.findMemberRole(2, 5))).toBeUndefined()
    expect(await same(() => members.findProjectMember(1, 2))).toStrictEqual({ projectId: 1, userId: 2, role: 'user', createdAt: T0 + 75, updatedAt: T0 + 75 })
    expect(await same(() => members.findProjectMember(3, 1))).toBeUndefined()
  })

  test('project members: other admins counted without the user; role changes; removal', async () => {
    // Project 1's admins: users 1, 3, 4.
    expect(await same(() => members.countOtherProjectAdmins(1, 1))).toBe(2)
    expect(await same(() => members.countOtherProjectAdmins(1, 5))).toBe(3) // a non-admin excludes nobody
    expect(await same(() => members.countOtherProjectAdmins(2, 1))).toBe(0) // the last admin
    expect(await same(() => members.countOtherProjectAdmins(4, 1))).toBe(0) // a project without members
    await same(() => members.updateProjectMemberRole(1, 3, 'user', T0 + 80))
    await same(() => members.updateProjectMemberRole(1, 4, 'editor', T0 + 81))
    await same(() => members.updateProjectMemberRole(4, 4, 'admin', T0 + 82)) // not a member: nothing
    expect(await same(() => members.countOtherProjectAdmins(1, 1))).toBe(0)
    expect(await same(() => members.countOtherProjectAdmins(1, 4))).toBe(1)
    expect(await same(() => members.findProjectMember(1, 3))).toStrictEqual({ projectId: 1, userId: 3, role: 'user', createdAt: T0 + 76, updatedAt: T0 + 80 })
    expect(await same(() => members.findProjectMember(4, 4))).toBeUndefined()

    await same(() => members.deleteProjectMember(1, 2))
    await same(() => members.deleteProjectMember(4, 2)) // not a member: nothing
    expect(await same(() => members.findMemberRole(1, 2))).toBeUndefined()
    expect((await same(() => members.membersOfProject(1))).map((m) => m.id)).toEqual([4, 5, 1, 3])
  })

  test('team members: memberships by team name in byte order then user id; a member taken out of every team of one project', async () => {
    // Teams of project 1: 1 support, 2 Sales, 3 ñandú, 4 Billing; of project 2: 5 support.
    const join = (teamId: number, userId: number) => members.insertTeamMember(teamId, userId, T0 + 90)
    for (const [teamId, userId] of [[1, 5], [1, 1], [1, 4], [2, 4], [3, 3], [4, 1], [5, 4], [5, 1]] as const) await same(() => join(teamId, userId))

    expect(await same(() => members.teamMembershipsOfProject(1))).toEqual([
      { userId: 1, team: 'Billing' },
      { userId: 4, team: 'Sales' },
      { userId: 1, team: 'support' },
      { userId: 4, team: 'support' },
      { userId: 5, team: 'support' },
      { userId: 3, team: 'ñandú' },
    ])
    expect(await same(() => members.teamMembershipsOfProject(3))).toEqual([])
    expect(await same(() => members.teamNamesOfMember(1, 4))).toEqual(['Sales', 'support'])
    expect(await same(() => members.teamNamesOfMember(1, 1))).toEqual(['Billing', 'support'])
    expect(await same(() => members.teamNamesOfMember(1, 2))).toEqual([])
    expect(await same(() => members.isTeamMember(3, 3))).toBe(true)
    expect(await same(() => members.isTeamMember(3, 4))).toBe(false)
    expect(await same(() => members.isTeamMember(99, 4))).toBe(false)

    await same(() => members.deleteTeamMember(1, 5))
    await same(() => members.deleteTeamMember(1, 2)) // not in it: nothing
    expect(await same(() => members.isTeamMember(1, 5))).toBe(false)

    // User 4 leaves every team of project 1 (support, Sales) but stays in project 2's support team.
    await same(() => members.deleteMemberFromProjectTeams(1, 4))
    await same(() => members.deleteMemberFromProjectTeams(4, 4)) // a project without teams: nothing
    expect(await same(() => members.teamNamesOfMember(1, 4))).toEqual([])
    expect(await same(() => members.teamNamesOfMember(2, 4))).toEqual(['support'])
    expect(await same(() => members.teamMembershipsOfProject(1))).toEqual([
      { userId: 1, team: 'Billing' },
      { userId: 1, team: 'support' },
      { userId: 3, team: 'ñandú' },
    ])
    expect(await same(() => members.teamMembershipsOfProject(2))).toEqual([
      { userId: 1, team: 'support' },
      { userId: 4, team: 'support' },
    ])
  })

  test('collection access: one statement answers what the separate lookups answer, for every user, team and collection', async () => {
    // Users 1–5 (one deactivated by now, 99 unknown), project 1's teams 1–4 and a team of project 2, collections 1–2
    // (collection 1 has permission rows for teams 1 and 2) and one unknown.
    const facts: members.CollectionAccessFacts[] = []
    for (const userId of [1, 2, 3, 4, 5, 99]) {
      for (const teamId of [1, 2, 3, 4, 5, 0]) {
        for (const collectionId of [1, 2, 99]) {
          const input = { userId, projectId: 1, teamId, collectionId }
          const found = await same(() => members.collectionAccessFacts(input))
          const user = await same(() => users.findUserById(userId))
          if (user === undefined) {
            expect(found).toBeUndefined()
            continue
          }
          const permission = await same(() => projects.findCollectionPermission(collectionId, teamId))
          expect(found).toStrictEqual({
            disabledAt: user.disabledAt,
            role: (await same(() => members.findMemberRole(1, userId))) ?? null,
            teamMember: (await same(() => members.isTeamMember(teamId, userId))) ? teamId : null,
            canRead: permission?.canRead ?? null,
            canEdit: permission?.canEdit ?? null,
          })
          facts.push(found!)
        }
      }
    }
    // The grid reaches every kind of answer: deactivated, admin, member and not, a permission row and none.
    expect(facts.some((f) => f.disabledAt !== null)).toBe(true)
    expect(facts.some((f) => f.role === 'admin') && facts.some((f) => f.role === null) && facts.some((f) => f.role !== null && f.role !== 'admin')).toBe(true)
    expect(facts.some((f) => f.teamMember !== null)).toBe(true)
    expect(facts.some((f) => f.canRead === false) && facts.some((f) => f.canRead === null)).toBe(true)
  })

  test('collection grants: one statement answers, team by team, what the one-team statement answers for each of the user\'s teams', async () => {
    const memberships = await same(() => members.teamMembershipsOfProject(1))
    const grants: members.CollectionAccessFacts[][] = []
    for (const userId of [1, 2, 3, 4, 5, 99]) {
      for (const collectionId of [1, 2, 99]) {
        const found = await same(() => members.collectionGrantFacts({ userId, projectId: 1, collectionId }))
        if ((await same(() => users.findUserById(userId))) === undefined) {
          expect(found).toEqual([])
          continue
        }
        // The user's teams of project 1 by name (the memberships are listed so), each as the one-team statement sees it.
        const teamIds: number[] = []
        for (const { team } of memberships.filter((m) => m.userId === userId)) teamIds.push((await same(() => projects.findTeamByName(1, team)))!.id)
        const expected: members.CollectionAccessFacts[] = []
        for (const teamId of teamIds) expected.push((await same(() => members.collectionAccessFacts({ userId, projectId: 1, teamId, collectionId })))!)
        if (teamIds.length === 0) expected.push({ ...(await same(() => members.collectionAccessFacts({ userId, projectId: 1, teamId: 0, collectionId })))!, canRead: null, canEdit: null })
        expect(found).toStrictEqual(expected)
        grants.push(found)
      }
    }
    // The grid holds users of several teams, of one, and of none.
    expect(grants.some((g) => g.length > 1) && grants.some((g) => g.length === 1 && g[0]!.teamMember !== null) && grants.some((g) => g[0]!.teamMember === null)).toBe(true)
  })

  /** A function of the database handle (`(db: Db, …)`) would run on one store only; an op factory, written once, takes its arguments only. */
  const takesDatabase = (fn: (...args: never[]) => unknown) => /^[^(]*\(\s*_?db\b/.test(fn.toString())

  test('every function of the three modules is an op factory written once (none holds the database)', () => {
    for (const module of [members, projects, users]) {
      for (const [name, value] of Object.entries(module)) {
        if (typeof value === 'function') expect({ name, takesDatabase: takesDatabase(value as never) }).toEqual({ name, takesDatabase: false })
      }
    }
  })

  describe('conflicts on PostgreSQL', () => {
    /** Where each answer ended: the value, or the error's HTTP status and code, or its SQLSTATE. */
    const outcome = (work: Promise<unknown>) =>
      work.then(
        (value) => ({ value }),
        (error: unknown) => (error instanceof HttpError ? { status: error.status, code: error.code } : { sqlState: sqlStateOf(error) }),
      )

    /**
     * Another instance's write: `first`'s op in a transaction held open until this instance's write (`second`) waits
     * on a lock it holds (its insert blocked on the unique index, its check having seen nothing), then committed.
     * Answers the outcome of `second`.
     */
    async function race<T>(pg: PgStore, first: () => Op<unknown>, second: () => Op<T>) {
      let release!: () => void
      const held = new Promise<void>((resolve) => (release = resolve))
      let firstDone!: () => void
      const firstReady = new Promise<void>((resolve) => (firstDone = resolve))
      const committing = pg.db.transaction(async (tx) => {
        const answer = await runOpOnPostgres(tx, first())
        firstDone()
        await held
        return answer
      })
      await firstReady
      const racing = outcome(writeNow(pg, second))
      const deadline = Date.now() + 10_000
      while (!(await waitingOnLock(pg))) {
        if (Date.now() > deadline) throw new Error('the racing insert never waited on the first transaction')
        await Bun.sleep(5)
      }
      release()
      await committing
      return racing
    }

    /** The users service's check-then-insert (createUser without its admin log entry). */
    const createOnce = (email: string) =>
      function* () {
        if ((yield* findUserByEmail(email))) throw conflict('user_exists', `A user with email ${email} already exists`)
        return yield* insertUser(stores.sqlite.clock, { email, username: 'someone' })
      }

    const waitingOnLock = async (pg: PgStore) =>
      ((await pg.sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) as { n: number }[])[0]!.n > 0

    test('the same email twice in one instance: the service check answers 409; a bare duplicate insert fails 23505 on both stores', async () => {
      expect(await outcome(writeNow(stores.pg, createOnce('zoe@example.test')))).toEqual({ status: 409, code: 'user_exists' })
      const bare = () => user('zoe@example.test')
      expect(() => stores.sqlite.store.commitNow(bare)).toThrow(expect.objectContaining({ code: 'SQLITE_CONSTRAINT_UNIQUE' }))
      expect(await outcome(writeNow(stores.pg, bare))).toEqual({ sqlState: '23505' })
    })

    test('two instances creating one email at once: one user, and the other gets the service 409, not a 500', async () => {
      const before = await writeNow(stores.pg, () => users.countAllUsers())
      const second = await race(stores.pg, createOnce('racer@example.test'), createOnce('racer@example.test'))
      expect(second).toEqual({ status: 409, code: 'user_exists' })
      expect(await writeNow(stores.pg, () => users.countAllUsers())).toBe(before + 1)
    })

    test('two instances adding one team name at once: one team, the other a 409', async () => {
      const addTeam = (name: string) =>
        function* () {
          if ((yield* projects.findPartByName('team', 2, name))) throw conflict('name_taken', `The project already has a team named ${name}`)
          return yield* projects.insertPart('team', { projectId: 2, name, createdAt: T0 + 120 })
        }
      const second = await race(stores.pg, addTeam('Ops'), addTeam('Ops'))
      expect(second).toEqual({ status: 409, code: 'name_taken' })
      expect(await writeNow(stores.pg, () => projects.findTeamByName(2, 'Ops'))).toMatchObject({ projectId: 2, name: 'Ops' })
    })
  })
})
