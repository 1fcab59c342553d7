/**
 * What authentication asks the database, per request: a token by the hash of its value (with its user, project and
 * the user's role there now), and the throttled `lastUsedAt` stamp. Both prepared once per connection, the rows
 * shaped by hand (Drizzle's row mapping cost more than the query); the token lookup is cached per connection with
 * exact invalidation (lookup-cache.ts): a revocation, deactivation or role change applies to the next request.
 */
import type { PermissionLevel } from '../lib/access.ts'
import { cachedLookup } from './lookup-cache.ts'
import type { Db } from './open.ts'
import { statementOn } from './prepared.ts'

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

type StoredTokenAuthRow = Omit<TokenAuthRow, 'createdWithSso' | 'projectSso'> & { createdWithSso: number; projectSso: number }

const TOKEN_BY_HASH = `SELECT t.id AS tokenId, t.token_hash AS tokenHash, t.user_id AS userId, t.scopes AS scopes,
    t.created_with_sso AS createdWithSso, t.expires_at AS expiresAt, t.revoked_at AS revokedAt, t.last_used_at AS lastUsedAt,
    t.project_id AS projectId, p.name AS projectName, p.sso AS projectSso,
    u.email AS email, u.username AS username, u.disabled_at AS disabledAt, m.role AS role
  FROM api_tokens t
    JOIN users u ON u.id = t.user_id
    JOIN projects p ON p.id = t.project_id
    LEFT JOIN project_members m ON m.project_id = t.project_id AND m.user_id = t.user_id
  WHERE t.token_hash = ?`

/** The token whose value hashes to `hash`, with what the auth decision reads; undefined when unknown. */
export function findTokenByHash(db: Db, hash: string): TokenAuthRow | undefined {
  return cachedLookup(db, 'token-by-hash', hash, () => {
    const row = statementOn(db, 'auth.token-by-hash', TOKEN_BY_HASH).all(hash)[0] as StoredTokenAuthRow | undefined
    return row && { ...row, createdWithSso: row.createdWithSso === 1, projectSso: row.projectSso === 1 }
  })
}

/** Stamps `lastUsedAt = now` unless it was stamped after `before` (never a write per request). */
export function touchTokenLastUsed(db: Db, tokenId: number, now: number, before: number): void {
  statementOn(db, 'auth.touch-token', 'UPDATE api_tokens SET last_used_at = ?1 WHERE id = ?2 AND (last_used_at IS NULL OR last_used_at <= ?3)').run(
    now,
    tokenId,
    before,
  )
}
