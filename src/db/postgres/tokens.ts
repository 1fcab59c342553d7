/**
 * Issue 18: application tokens as PostgreSQL twins of src/db/tokens.ts and of the per-request authentication queries
 * of src/db/auth-queries.ts. SQLite caches the token lookup per connection (src/db/lookup-cache.ts); here it is a
 * plain query on every request, so a revocation, deactivation or role change made through any instance sharing the
 * database is refused by every instance on its next request.
 */
import { and, eq, gt, isNull, lte, or, sql } from 'drizzle-orm'
import { findTokenByHash, touchTokenLastUsed, type TokenAuthRow } from '../auth-queries.ts'
import { lockLiveToken } from '../tokens.ts'
import { apiTokens, projectMembers, projects, users } from './schema.ts'
import type { PgDb } from './store.ts'
import { preparedOn } from './prepared.ts'
import { twin, twins } from './twin.ts'

/** As SQLite's, and the row stays locked (FOR SHARE) until commit: a concurrent revocation of it waits for this transaction. */
async function lockLiveTokenOnPostgres(db: PgDb, tokenId: number, now: number): Promise<{ expiresAt: number | null } | undefined> {
  const live = and(eq(apiTokens.id, tokenId), isNull(apiTokens.revokedAt), or(isNull(apiTokens.expiresAt), gt(apiTokens.expiresAt, now)))
  return (await db.select({ expiresAt: apiTokens.expiresAt }).from(apiTokens).where(live).for('share'))[0]
}

/** The token whose value hashes to `hash`, with what the auth decision reads: read afresh on every call. */
async function findTokenByHashOnPostgres(db: PgDb, hash: string): Promise<TokenAuthRow | undefined> {
  const [row] = await preparedOn(db, 'tokens.by-hash', (db) => db
    .select({
      tokenId: apiTokens.id,
      tokenHash: apiTokens.tokenHash,
      userId: apiTokens.userId,
      scopes: apiTokens.scopes,
      createdWithSso: apiTokens.createdWithSso,
      expiresAt: apiTokens.expiresAt,
      revokedAt: apiTokens.revokedAt,
      lastUsedAt: apiTokens.lastUsedAt,
      projectId: apiTokens.projectId,
      projectName: projects.name,
      projectSso: projects.sso,
      email: users.email,
      username: users.username,
      disabledAt: users.disabledAt,
      role: projectMembers.role,
    })
    .from(apiTokens)
    .innerJoin(users, eq(users.id, apiTokens.userId))
    .innerJoin(projects, eq(projects.id, apiTokens.projectId))
    .leftJoin(projectMembers, and(eq(projectMembers.projectId, apiTokens.projectId), eq(projectMembers.userId, apiTokens.userId)))
    .where(eq(apiTokens.tokenHash, sql.placeholder('hash'))),
  ).execute({ hash })
  return row
}

async function touchTokenLastUsedOnPostgres(db: PgDb, tokenId: number, now: number, before: number): Promise<void> {
  await db
    .update(apiTokens)
    .set({ lastUsedAt: now })
    .where(and(eq(apiTokens.id, tokenId), or(isNull(apiTokens.lastUsedAt), lte(apiTokens.lastUsedAt, before))))
}

/** The twins of the tokens' storage and of the authentication queries, by the SQLite function they stand for. */
export const TOKENS_TWINS = twins(
  // per-dialect: PostgreSQL locks the live token FOR SHARE until commit against a concurrent revocation; SQLite's one writer needs no lock.
  twin(lockLiveToken, lockLiveTokenOnPostgres),
  twin(findTokenByHash, findTokenByHashOnPostgres),
  twin(touchTokenLastUsed, touchTokenLastUsedOnPostgres),
)
