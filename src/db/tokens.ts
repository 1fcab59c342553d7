/**
 * The tokens domain's storage: application tokens created, revoked, found by id and listed with their project
 * and owner. The per-request lookup by hash (and the `lastUsedAt` stamp) stays prepared in `auth-queries.ts`.
 * Only hashes and display prefixes are stored: generating and hashing values is the tokens service's.
 */
import { and, count, desc, eq, gt, inArray, isNull, or } from 'drizzle-orm'
import type { Answer, Op } from './op.ts'
import { inserted, row, rows } from './query.ts'
import { lockRule } from './rule-locks.ts'
import type { apiTokens } from './schema.ts'

export type TokenRow = typeof apiTokens.$inferSelect
export type NewTokenRow = Omit<typeof apiTokens.$inferInsert, 'id' | 'revokedAt' | 'lastUsedAt'>

/**
 * Inserts a token unless its user already holds `atMost` live ones — neither revoked nor expired at the token's
 * `createdAt` —: then undefined, and nothing is written. The only way a token is made. The user's live-tokens lock
 * (./rule-locks.ts) is taken before the count, so on PostgreSQL the creations of one user's tokens count and insert
 * one at a time across every instance, each counting (a fresh snapshot per statement) what the one before committed.
 */
export function* insertTokenWithin(token: NewTokenRow, atMost: number): Op<TokenRow | undefined> {
  yield* lockRule('liveTokens', token.userId)
  const live = yield* row(({ db, t }) =>
    db
      .select({ n: count() })
      .from(t.apiTokens)
      .where(and(eq(t.apiTokens.userId, token.userId), isNull(t.apiTokens.revokedAt), or(isNull(t.apiTokens.expiresAt), gt(t.apiTokens.expiresAt, token.createdAt)))),
  )
  if ((live?.n ?? 0) >= atMost) return undefined
  return yield* inserted(row(({ db, t }) => db.insert(t.apiTokens).values(token).returning()), 'token')
}

/** Stamps `revokedAt` on a live token; false when it was already revoked. */
export function* revokeLiveToken(tokenId: number, now: number): Op<boolean> {
  const revoked = yield* rows(({ db, t }) =>
    db
      .update(t.apiTokens)
      .set({ revokedAt: now })
      .where(and(eq(t.apiTokens.id, tokenId), isNull(t.apiTokens.revokedAt)))
      .returning({ id: t.apiTokens.id }),
  )
  return revoked.length > 0
}

/**
 * A live token's expiry, before it makes another token (`undefined`: revoked or expired by `now`). The row stays
 * locked (`forShare`) until commit: a revocation of it waits for the new token to commit and then revokes it too, or
 * a new token waits for the revocation and is refused.
 */
export function lockLiveToken(tokenId: number, now: number) {
  return row(({ db, t, forShare }) => {
    const live = and(eq(t.apiTokens.id, tokenId), isNull(t.apiTokens.revokedAt), or(isNull(t.apiTokens.expiresAt), gt(t.apiTokens.expiresAt, now)))
    return forShare(db.select({ expiresAt: t.apiTokens.expiresAt }).from(t.apiTokens).where(live))
  })
}

/**
 * Revokes every live token `tokenId` made, and every live one those made, to the end (call it with the revocation of
 * `tokenId` itself, in the same transaction); the rows revoked, by id. Through live tokens only: what a revoked token
 * made was revoked with it. One generation per statement: on PostgreSQL (READ COMMITTED) each statement reads a fresh
 * snapshot, taken after the previous one updated (and so waited for the locks of) the makers of this generation — a
 * token made under a lock of lockLiveToken was committed by then, and is found here. SQLite's one writer sees the same.
 */
export function* revokeTokensMadeBy(tokenId: number, now: number): Op<TokenRow[]> {
  const revoked: TokenRow[] = []
  for (let makers = [tokenId]; makers.length > 0; ) {
    const generation: TokenRow[] = yield* rows(({ db, t }) =>
      db
        .update(t.apiTokens)
        .set({ revokedAt: now })
        .where(and(inArray(t.apiTokens.parentTokenId, makers), isNull(t.apiTokens.revokedAt)))
        .returning(),
    )
    revoked.push(...generation)
    makers = generation.map((token) => token.id)
  }
  return revoked.sort((a, b) => a.id - b.id)
}

export function findTokenById(id: number) {
  return row(({ db, t }) => db.select().from(t.apiTokens).where(eq(t.apiTokens.id, id)))
}

/** Tokens newest first, with their project's name and owner; each filter given narrows the list. */
export function listTokenRows(filter: { userId?: number; projectId?: number; includeRevoked?: boolean }) {
  return rows(({ db, t }) =>
    db
      .select({ token: t.apiTokens, projectName: t.projects.name, owner: { id: t.users.id, email: t.users.email, username: t.users.username } })
      .from(t.apiTokens)
      .innerJoin(t.projects, eq(t.projects.id, t.apiTokens.projectId))
      .innerJoin(t.users, eq(t.users.id, t.apiTokens.userId))
      .where(
        and(
          filter.userId === undefined ? undefined : eq(t.apiTokens.userId, filter.userId),
          filter.projectId === undefined ? undefined : eq(t.apiTokens.projectId, filter.projectId),
          filter.includeRevoked ? undefined : isNull(t.apiTokens.revokedAt),
        ),
      )
      .orderBy(desc(t.apiTokens.id)),
  )
}

export type TokenListRow = Answer<ReturnType<typeof listTokenRows>>[number]
