/**
 * SSO identities on both stores (the sign-in itself, against a real provider, is oidc.test.ts on
 * SQLite): the storage twins of src/db/sso-identities.ts answer alike and leave the same rows; the binding rules of
 * src/modules/auth/oidc-service.ts give the same outcome on SQLite and PostgreSQL; and on PostgreSQL, with several
 * writers, the database keeps them — concurrent first sign-ins of one account create one user and one binding, and
 * concurrent links never give a user two accounts of one issuer or an account two users.
 */
import { describe, expect, test } from 'bun:test'
import { writeNow } from '../src/db/write.ts'
import type { Op } from '../src/db/op.ts'
import { deleteUserSsoIdentity, findSsoIdentity, findUserSsoIdentity, insertSsoIdentity } from '../src/db/sso-identities.ts'
import { HttpError } from '../src/lib/errors.ts'
import { manualClock } from '../src/lib/clock.ts'
import type { SsoClaims } from '../src/modules/auth/oidc.ts'
import { SsoRefusal } from '../src/modules/auth/oidc.ts'
import { type LinkedBy, linkSsoIdentity, resolveSsoUser, unlinkSsoIdentity } from '../src/modules/auth/oidc-service.ts'
import { findUser } from '../src/modules/users/service.ts'
import { alike, bothStores, postgresOrSkip } from './support/both-stores.ts'
import { SEEDED_AT, seedOrganization } from './support/seed-both.ts'

const T = SEEDED_AT
const ISSUER = 'https://id.example.com/realms/acme'
const OPERATOR: LinkedBy = { actorId: null, initiator: 'administrator', how: 'by an operator (CLI)' }
const ROWS = 'SELECT issuer, subject, user_id, created_at FROM sso_identities ORDER BY id'

const claims = (subject: string, email: string | undefined, emailVerified = true): SsoClaims => ({ issuer: ISSUER, subject, email, emailVerified, name: undefined })

/** The op's answer, or the code of its refusal (an SsoRefusal page, or an HttpError). */
function* outcome<T>(work: Op<T>): Op<T | string> {
  try {
    return yield* work
  } catch (error) {
    if (error instanceof SsoRefusal || error instanceof HttpError) return error.code
    throw error
  }
}

/** Who the claims sign in as (the user's id), or the refusal's code. */
const signInOf = (subject: string, email: string | undefined, options: { verified?: boolean; autoCreate?: boolean } = {}) =>
  function* () {
    const user = yield* outcome(resolveSsoUser(manualClock(T + 1), claims(subject, email, options.verified ?? true), options.autoCreate ?? false))
    return typeof user === 'string' ? user : user.id
  }

const linkOf = (userId: number, subject: string, issuer = ISSUER) =>
  function* () {
    return yield* outcome(linkSsoIdentity(manualClock(T + 2), (yield* findUser(userId))!, { issuer, subject }, OPERATOR))
  }

describe.skipIf(!postgresOrSkip('SSO identities twins'))('SSO identities: storage twins and binding rules on both stores', () => {
  const stores = bothStores()
  /** Each op on both stores; the answers must agree. Returns SQLite's. */
  const same = <T>(...bodies: (() => Op<T>)[]) => alike(stores, bodies)
  const sameRows = async () => {
    const pg = [...(await stores.pg.sql.unsafe(ROWS.replace('user_id, created_at', 'user_id::float8 AS user_id, created_at::float8 AS created_at')))]
    expect(pg).toEqual(stores.sqlite.store.sqlite.prepare(ROWS).all())
    return pg
  }

  test('storage: a pair binds once, a user has one account per issuer; found by pair and by user; unbound', async () => {
    await seedOrganization(stores)
    const inserts = await same(
      () => insertSsoIdentity({ issuer: ISSUER, subject: 's-carol', userId: 1 }, T),
      () => insertSsoIdentity({ issuer: ISSUER, subject: 's-carol', userId: 2 }, T), // the pair is carol's
      () => insertSsoIdentity({ issuer: ISSUER, subject: 's-other', userId: 1 }, T), // carol has an account of ISSUER
      () => insertSsoIdentity({ issuer: 'https://other.example', subject: 's-carol', userId: 2 }, T + 1), // another issuer: its own namespace
    )
    expect(inserts).toEqual([true, false, false, true])
    const [found] = await same(function* () {
      return [
        yield* findSsoIdentity(ISSUER, 's-carol'),
        yield* findSsoIdentity('https://other.example', 's-carol'),
        yield* findSsoIdentity(ISSUER, 's-unknown'),
        yield* findUserSsoIdentity(1, ISSUER),
        yield* findUserSsoIdentity(2, ISSUER),
      ]
    })
    expect(found).toEqual([{ userId: 1 }, { userId: 2 }, undefined, { subject: 's-carol' }, undefined])
    expect(await sameRows()).toEqual([
      { issuer: ISSUER, subject: 's-carol', user_id: 1, created_at: T },
      { issuer: 'https://other.example', subject: 's-carol', user_id: 2, created_at: T + 1 },
    ])
    expect(await same(() => deleteUserSsoIdentity(2, 'https://other.example'), () => deleteUserSsoIdentity(2, 'https://other.example'))).toEqual([
      { subject: 's-carol' },
      undefined,
    ])
    await sameRows()
  })

  test('the rules: a bound pair is its user whatever the email; an existing email asks for a link; never re-bound; auto-create binds', async () => {
    const answers = await same(
      signInOf('s-carol', 'someone-else@example.com', { verified: false }), // (a) bound: carol, whatever the email says
      signInOf('s-alice', 'alice@example.com'), // (c) alice's email, not linked: link required
      signInOf('s-alice', 'alice@example.com', { verified: false }), // an unverified email never gets that far
      signInOf('s-alice', undefined),
      signInOf('s-impostor', 'carol@example.com'), // carol has another account of this issuer: never re-bound
      signInOf('s-new', 'new@example.com'), // (b) unknown email, auto-create off
      signInOf('s-new', 'new@example.com', { autoCreate: true }), // (b) auto-create: user 7, bound
      signInOf('s-new', 'changed@example.com'), // and found by the pair from then on
      signInOf('s-lone\ud800', 'x@example.com'), // text no store holds
    )
    expect(answers).toEqual([1, 'sso_link_required', 'sso_email_unverified', 'sso_email_missing', 'sso_identity_conflict', 'sso_unknown_user', 7, 7, 'sso_identity_invalid'])
    // Linking: alice's account linked by an operator; then it signs in as alice; bob is deactivated.
    expect(await same(linkOf(2, 's-alice'), linkOf(2, 's-alice'), linkOf(2, 's-alice-2'), linkOf(4, 's-alice'), linkOf(3, 's-bob'))).toEqual([
      true,
      false,
      'sso_identity_conflict',
      'sso_identity_conflict',
      true,
    ])
    expect(await same(signInOf('s-alice', 'whatever@example.com'), signInOf('s-bob', 'bob@example.com'))).toEqual([2, 'user_deactivated'])
    expect(await same(function* () {
      return yield* unlinkSsoIdentity(manualClock(T + 3), (yield* findUser(2))!, ISSUER)
    })).toEqual(['s-alice'])
    expect(await same(signInOf('s-alice', 'alice@example.com'))).toEqual(['sso_link_required'])
    await sameRows()
    // Each link and unlink wrote its admin log entry, alike (after the seeded ones).
    const entries = "SELECT type, resource, initiator, subject_user_id, new_value FROM admin_logs WHERE project_id IS NULL AND resource = 'user' ORDER BY id"
    const pg = [...(await stores.pg.sql.unsafe(entries.replace('subject_user_id', 'subject_user_id::float8 AS subject_user_id')))]
    expect(pg).toEqual(stores.sqlite.store.sqlite.prepare(entries).all())
    expect(pg.slice(-4).map((e) => [e.type, e.initiator, e.subject_user_id])).toEqual([
      ['add', 'identityProvider', 7],
      ['update', 'administrator', 2],
      ['update', 'administrator', 3],
      ['update', 'administrator', 2],
    ])
  })

  test('PostgreSQL, several writers: concurrent first sign-ins of one account create one user and one binding', async () => {
    const signIns = Array.from({ length: 8 }, () => writeNow(stores.pg, signInOf('s-rush', 'rush@example.com', { autoCreate: true })))
    const users = await Promise.all(signIns)
    expect(new Set(users).size).toBe(1)
    expect(typeof users[0]).toBe('number')
    const rows = [...(await stores.pg.sql.unsafe("SELECT user_id::float8 AS user_id FROM sso_identities WHERE subject = 's-rush'"))]
    expect(rows).toEqual([{ user_id: users[0] }])
    expect([...(await stores.pg.sql.unsafe("SELECT count(*)::int AS n FROM users WHERE email = 'rush@example.com'"))]).toEqual([{ n: 1 }])
  })

  test('PostgreSQL, several writers: concurrent links give a user one account of the issuer, and an account one user', async () => {
    const toOneUser = await Promise.all(Array.from({ length: 6 }, (_, i) => writeNow(stores.pg, linkOf(4, `s-race-${i}`))))
    expect(toOneUser.filter((answer) => answer === true)).toHaveLength(1)
    expect(toOneUser.filter((answer) => answer === 'sso_identity_conflict')).toHaveLength(5)
    const toManyUsers = await Promise.all([4, 5, 6].map((userId) => writeNow(stores.pg, linkOf(userId, 's-race-0', 'https://race.example'))))
    expect(toManyUsers.filter((answer) => answer === true)).toHaveLength(1)
    const count = async (where: string) => ((await stores.pg.sql.unsafe(`SELECT count(*)::int AS n FROM sso_identities WHERE ${where}`)) as { n: number }[])[0]!.n
    expect(await count(`user_id = 4 AND issuer = '${ISSUER}'`)).toBe(1)
    expect(await count("issuer = 'https://race.example' AND subject = 's-race-0'")).toBe(1)
  })
})
