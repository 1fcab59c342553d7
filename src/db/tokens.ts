/**
 * The tokens domain's storage: application tokens created, revoked, found by id and listed with their project
 * and owner. The per-request lookup by hash (and the `lastUsedAt` stamp) stays prepared in `auth-queries.ts`.
 * Only hashes and display prefixes are stored: generating and hashing values is the tokens service's.
 */
import { and, desc, eq, gt, isNull, or, sql } from 'drizzle-orm'
import type { Db } from './open.ts'
import { apiTokens, projects, users } from './schema.ts'

export type TokenRow = typeof apiTokens.$inferSelect
export type NewTokenRow = Omit<typeof apiTokens.$inferInsert, 'id' | 'revokedAt' | 'lastUsedAt'>

export function insertToken(db: Db, row: NewTokenRow): TokenRow {
  const [token] = db.insert(apiTokens).values(row).returning().all()
  if (!token) throw new Error('token insert returned no row')
  return token
}

/** Stamps `revokedAt` on a live token; false when it was already revoked. */
export function revokeLiveToken(db: Db, tokenId: number, now: number): boolean {
  const revoked = db
    .update(apiTokens)
    .set({ revokedAt: now })
    .where(and(eq(apiTokens.id, tokenId), isNull(apiTokens.revokedAt)))
    .returning({ id: apiTokens.id })
    .all()
  return revoked.length > 0
}

/**
 * A live token's expiry, before it makes another token (`undefined`: revoked or expired by `now`). PostgreSQL's twin
 * locks the row (FOR SHARE) until commit: a revocation of it waits for the new token to commit and then revokes it
 * too, or a new token waits for the revocation and is refused. SQLite's one writer needs no lock.
 */
export function lockLiveToken(db: Db, tokenId: number, now: number): { expiresAt: number | null } | undefined {
  const live = and(eq(apiTokens.id, tokenId), isNull(apiTokens.revokedAt), or(isNull(apiTokens.expiresAt), gt(apiTokens.expiresAt, now)))
  return db.select({ expiresAt: apiTokens.expiresAt }).from(apiTokens).where(live).get()
}

/**
 * Revokes every live token `tokenId` made, and every live one those made, to the end (call it with the revocation of
 * `tokenId` itself, in the same transaction); the rows revoked, by id. One statement on SQLite (its one writer);
 * PostgreSQL's twin walks one generation per statement, each with a fresh snapshot, so a token committed by a
 * concurrent transaction before its maker's row was locked here is seen (lockLiveToken).
 */
export function revokeTokensMadeBy(db: Db, tokenId: number, now: number): TokenRow[] {
  // Through live tokens only: what a revoked token made was revoked with it (as PostgreSQL's twin walks).
  const made = sql`WITH RECURSIVE made(id) AS (
      SELECT id FROM api_tokens WHERE parent_token_id = ${tokenId} AND revoked_at IS NULL
      UNION SELECT t.id FROM api_tokens t JOIN made ON t.parent_token_id = made.id WHERE t.revoked_at IS NULL)
    SELECT id FROM made`
  return db
    .update(apiTokens)
    .set({ revokedAt: now })
    .where(sql`${apiTokens.id} IN (${made})`)
    .returning()
    .all()
    .sort((a, b) => a.id - b.id)
}

export function findTokenById(db: Db, id: number): TokenRow | undefined {
  return db.select().from(apiTokens).where(eq(apiTokens.id, id)).get()
}

const tokenListColumns = {
  token: apiTokens,
  projectName: projects.name,
  owner: { id: users.id, email: users.email, username: users.username },
}

/** Tokens newest first, with their project's name and owner; each filter given narrows the list. */
export function listTokenRows(db: Db, filter: { userId?: number; projectId?: number; includeRevoked?: boolean }) {
  return db
    .select(tokenListColumns)
    .from(apiTokens)
    .innerJoin(projects, eq(projects.id, apiTokens.projectId))
    .innerJoin(users, eq(users.id, apiTokens.userId))
    .where(
      and(
        filter.userId === undefined ? undefined : eq(apiTokens.userId, filter.userId),
        filter.projectId === undefined ? undefined : eq(apiTokens.projectId, filter.projectId),
        filter.includeRevoked ? undefined : isNull(apiTokens.revokedAt),
      ),
    )
    .orderBy(desc(apiTokens.id))
    .all()
}

export type TokenListRow = ReturnType<typeof listTokenRows>[number]
