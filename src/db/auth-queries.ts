/**
 * What authentication asks the database, per request: a token by the hash of its value (with its user, project and
 * the user's role there now), and the throttled `lastUsedAt` stamp. Both built once per dialect and connection. The
 * token lookup is cached with exact invalidation (lookup-cache.ts: per connection on SQLite, per instance on
 * PostgreSQL through a generation row), so a revocation, deactivation or role change — made through any instance
 * sharing the database — applies to every instance's next request.
 */
import { and, eq, isNull, lte, or, sql } from 'drizzle-orm'
import type { PermissionLevel } from '../lib/access.ts'
import type { Dialect } from './dialect.ts'
import { cached } from './lookup-cache.ts'
import type { Op } from './op.ts'
import { setPlaceholders, statement } from './query.ts'

export interface TokenAuthRow {
  tokenId: number
  tokenHash: string
  userId: number
  /** JSON array of scope names. */
  scopes: string
  createdWithSso: boolean
  expiresAt: number | null
  revokedAt: number | null
  /** As read when the row was (cached lookups may hold an older stamp: it only throttles the next one). */
  lastUsedAt: number | null
  projectId: number
  projectName: string
  projectSso: boolean
  email: string
  username: string
  disabledAt: number | null
  role: PermissionLevel | null
}

const selectTokenByHash = ({ db, t }: Dialect) =>
  db
    .select({
      tokenId: t.apiTokens.id,
      tokenHash: t.apiTokens.tokenHash,
      userId: t.apiTokens.userId,
      scopes: t.apiTokens.scopes,
      createdWithSso: t.apiTokens.createdWithSso,
      expiresAt: t.apiTokens.expiresAt,
      revokedAt: t.apiTokens.revokedAt,
      lastUsedAt: t.apiTokens.lastUsedAt,
      projectId: t.apiTokens.projectId,
      projectName: t.projects.name,
      projectSso: t.projects.sso,
      email: t.users.email,
      username: t.users.username,
      disabledAt: t.users.disabledAt,
      role: t.projectMembers.role,
    })
    .from(t.apiTokens)
    .innerJoin(t.users, eq(t.users.id, t.apiTokens.userId))
    .innerJoin(t.projects, eq(t.projects.id, t.apiTokens.projectId))
    .leftJoin(t.projectMembers, and(eq(t.projectMembers.projectId, t.apiTokens.projectId), eq(t.projectMembers.userId, t.apiTokens.userId)))
    .where(eq(t.apiTokens.tokenHash, sql.placeholder('hash')))

const TOKEN_BY_HASH = statement('auth.token-by-hash', selectTokenByHash)

/**
 * The token whose value hashes to `hash`, with what the auth decision reads; undefined when unknown. Cached (lookup-cache.ts:
 * per SQLite connection, per PostgreSQL instance); a change made through another instance applies at once.
 */
export function findTokenByHash(hash: string): Op<TokenAuthRow | undefined> {
  return cached('token-by-hash', hash, TOKEN_BY_HASH.row({ hash }))
}

const TOUCH_TOKEN = statement('auth.touch-token', ({ db, t }) =>
  db
    .update(t.apiTokens)
    .set(setPlaceholders('lastUsedAt'))
    .where(and(eq(t.apiTokens.id, sql.placeholder('tokenId')), or(isNull(t.apiTokens.lastUsedAt), lte(t.apiTokens.lastUsedAt, sql.placeholder('before'))))),
)

/** Stamps `lastUsedAt = now` unless it was stamped after `before` (never a write per request). */
export function touchTokenLastUsed(tokenId: number, now: number, before: number) {
  return TOUCH_TOKEN.exec({ lastUsedAt: now, tokenId, before })
}
