/** What of application tokens' storage (src/db/tokens.ts) differs on PostgreSQL: the live token's row lock. */
import { and, eq, gt, isNull, or } from 'drizzle-orm'
import { lockLiveToken } from '../tokens.ts'
import { apiTokens } from './schema.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

/** As SQLite's, and the row stays locked (FOR SHARE) until commit: a concurrent revocation of it waits for this transaction. */
async function lockLiveTokenOnPostgres(db: PgDb, tokenId: number, now: number): Promise<{ expiresAt: number | null } | undefined> {
  const live = and(eq(apiTokens.id, tokenId), isNull(apiTokens.revokedAt), or(isNull(apiTokens.expiresAt), gt(apiTokens.expiresAt, now)))
  return (await db.select({ expiresAt: apiTokens.expiresAt }).from(apiTokens).where(live).for('share'))[0]
}

/** The tokens' per-dialect operations, by the SQLite function they stand for. */
export const TOKENS_TWINS = twins(
  // per-dialect: PostgreSQL locks the live token FOR SHARE until commit against a concurrent revocation; SQLite's one writer needs no lock.
  twin(lockLiveToken, lockLiveTokenOnPostgres),
)
