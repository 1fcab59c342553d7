/**
 * The tokens domain's storage: application tokens created, revoked, found by id and listed with their project
 * and owner. The per-request lookup by hash (and the `lastUsedAt` stamp) stays prepared in `auth-queries.ts`.
 * Only hashes and display prefixes are stored: generating and hashing values is the tokens service's.
 */
import { and, desc, eq, isNull } from 'drizzle-orm'
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
