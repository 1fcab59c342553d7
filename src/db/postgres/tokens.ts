/**
 * Issue 18: application tokens as PostgreSQL twins of src/db/tokens.ts and of the per-request authentication queries
 * of src/db/auth-queries.ts. SQLite caches the token lookup per connection (src/db/lookup-cache.ts); here it is a
 * plain query on every request, so a revocation, deactivation or role change made through any instance sharing the
 * database is refused by every instance on its next request.
 */
import { and, desc, eq, gt, inArray, isNull, or } from 'drizzle-orm'
import { findTokenByHash, tokenByHash, type TokenAuthRow } from '../auth-queries.ts'
import {
  findTokenById,
  insertToken,
  listTokenRows,
  lockLiveToken,
  revokeLiveToken,
  revokeTokensMadeBy,
  type NewTokenRow,
  type TokenListRow,
  type TokenRow,
} from '../tokens.ts'
import { apiTokens, projects, users } from './schema.ts'
import type { PgDb } from './store.ts'
import { runQueryOnPostgres } from './dialect.ts'
import { twin, twins } from './twin.ts'

async function insertTokenOnPostgres(db: PgDb, row: NewTokenRow): Promise<TokenRow> {
  const [token] = await db.insert(apiTokens).values(row).returning()
  if (!token) throw new Error('token insert returned no row')
  return token
}

async function revokeLiveTokenOnPostgres(db: PgDb, tokenId: number, now: number): Promise<boolean> {
  const revoked = await db
    .update(apiTokens)
    .set({ revokedAt: now })
    .where(and(eq(apiTokens.id, tokenId), isNull(apiTokens.revokedAt)))
    .returning({ id: apiTokens.id })
  return revoked.length > 0
}

/** As SQLite's, and the row stays locked (FOR SHARE) until commit: a concurrent revocation of it waits for this transaction. */
async function lockLiveTokenOnPostgres(db: PgDb, tokenId: number, now: number): Promise<{ expiresAt: number | null } | undefined> {
  const live = and(eq(apiTokens.id, tokenId), isNull(apiTokens.revokedAt), or(isNull(apiTokens.expiresAt), gt(apiTokens.expiresAt, now)))
  return (await db.select({ expiresAt: apiTokens.expiresAt }).from(apiTokens).where(live).for('share'))[0]
}

/**
 * One generation per statement: in READ COMMITTED each statement reads a fresh snapshot, taken after the previous one
 * updated (and so waited for the locks of) the makers of this generation — a token made under a lock of lockLiveToken
 * was committed by then, and is found here.
 */
async function revokeTokensMadeByOnPostgres(db: PgDb, tokenId: number, now: number): Promise<TokenRow[]> {
  const revoked: TokenRow[] = []
  for (let makers = [tokenId]; makers.length > 0; ) {
    const generation = await db
      .update(apiTokens)
      .set({ revokedAt: now })
      .where(and(inArray(apiTokens.parentTokenId, makers), isNull(apiTokens.revokedAt)))
      .returning()
    revoked.push(...generation)
    makers = generation.map((token) => token.id)
  }
  return revoked.sort((a, b) => a.id - b.id)
}

async function findTokenByIdOnPostgres(db: PgDb, id: number): Promise<TokenRow | undefined> {
  return (await db.select().from(apiTokens).where(eq(apiTokens.id, id)))[0]
}

async function listTokenRowsOnPostgres(db: PgDb, filter: { userId?: number; projectId?: number; includeRevoked?: boolean }): Promise<TokenListRow[]> {
  return db
    .select({ token: apiTokens, projectName: projects.name, owner: { id: users.id, email: users.email, username: users.username } })
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
}

/** The token whose value hashes to `hash`, with what the auth decision reads: read afresh on every call. */
const findTokenByHashOnPostgres = (db: PgDb, hash: string) => runQueryOnPostgres(db, tokenByHash(hash)) as Promise<TokenAuthRow | undefined>

/** The twins of the tokens' storage and of the authentication queries, by the SQLite function they stand for. */
export const TOKENS_TWINS = twins(
  twin(insertToken, insertTokenOnPostgres),
  twin(revokeLiveToken, revokeLiveTokenOnPostgres),
  twin(lockLiveToken, lockLiveTokenOnPostgres),
  twin(revokeTokensMadeBy, revokeTokensMadeByOnPostgres),
  twin(findTokenById, findTokenByIdOnPostgres),
  twin(listTokenRows, listTokenRowsOnPostgres),
  // per-dialect: SQLite caches the lookup per connection (../lookup-cache.ts); PostgreSQL reads it afresh (other instances' changes).
  twin(findTokenByHash, findTokenByHashOnPostgres),
)
