/**
 * The one authentication decision (DESIGN §4). Bearer tokens for the public API, in this order:
 * token (401) → user active (403) → token's project is the path's project (403) → SSO (403) → scope (403)
 * → role (403). Project/environment existence (404) is checked by the route afterwards, so nothing about a
 * project is revealed before the token is accepted. Everything is read at request time — a revocation,
 * expiry, deactivation or demotion made by another process applies to the very next request.
 */
import { and, eq, sql } from 'drizzle-orm'
import { timingSafeEqual } from 'node:crypto'
import type { Store } from '../db/open.ts'
import { tryWrite } from '../db/write.ts'
import { apiTokens, type PermissionLevel, projectMembers, projects, users } from '../db/schema.ts'
import type { Clock } from '../lib/clock.ts'
import { hasScope, hashTokenValue, looksLikeToken, type Scope } from '../modules/tokens/service.ts'
import { forbidden, unauthorized } from './errors.ts'

export interface TokenIdentity {
  tokenId: number
  userId: number
  user: { id: number; email: string; username: string; disabledAt: number | null }
  projectId: number
  projectName: string
  projectSso: boolean
  scopes: string[]
  createdWithSso: boolean
  /** The user's permission level in the token's project now, or null when no longer a member. */
  role: PermissionLevel | null
}

/** What a project-scoped route requires. */
export interface ProjectNeed {
  scope: Scope
  role?: PermissionLevel
}

/** `Authorization: Bearer <value>`, scheme case-insensitive; null when missing or not a Bearer header. */
export function bearerValue(authorization: string | null | undefined): string | null {
  if (!authorization) return null
  const match = /^bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization)
  return match?.[1] ?? null
}

/** How often `lastUsedAt` may be written per token: never a write per request. */
export const LAST_USED_RESOLUTION_MS = 60_000

export class TokenAuthenticator {
  private readonly lookup
  private readonly touch

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {
    this.lookup = store.db
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
      .where(eq(apiTokens.tokenHash, sql.placeholder('hash')))
      .prepare()
    this.touch = store.db
      .update(apiTokens)
      .set({ lastUsedAt: sql`${sql.placeholder('now')}` })
      .where(
        and(
          eq(apiTokens.id, sql.placeholder('id')),
          sql`(${apiTokens.lastUsedAt} is null or ${apiTokens.lastUsedAt} <= ${sql.placeholder('before')})`,
        ),
      )
      .prepare()
  }

  /** 401 unless the header carries a known, live token. */
  authenticate(authorization: string | null | undefined): TokenIdentity {
    const value = bearerValue(authorization)
    if (value === null) throw unauthorized('Missing or malformed Authorization header; expected "Bearer <token>"')
    if (!looksLikeToken(value)) throw unauthorized('Invalid token')
    const hash = hashTokenValue(value)
    const row = this.lookup.all({ hash })[0]
    // The index finds the row by hash; compare again in constant time so equality never short-circuits.
    if (!row || !timingSafeEqual(Buffer.from(row.tokenHash), Buffer.from(hash))) throw unauthorized('Invalid token')
    const now = this.clock.now()
    if (row.revokedAt !== null) throw unauthorized('Token has been revoked')
    if (row.expiresAt !== null && row.expiresAt <= now) throw unauthorized('Token has expired')
    if (row.lastUsedAt === null || row.lastUsedAt <= now - LAST_USED_RESOLUTION_MS) {
      // Never a reason to refuse or delay a call: while the database is locked or full, the stamp waits for a later one.
      tryWrite(this.store, () => this.touch.run({ id: row.tokenId, now, before: now - LAST_USED_RESOLUTION_MS }))
    }
    return {
      tokenId: row.tokenId,
      userId: row.userId,
      user: { id: row.userId, email: row.email, username: row.username, disabledAt: row.disabledAt },
      projectId: row.projectId,
      projectName: row.projectName,
      projectSso: row.projectSso,
      scopes: JSON.parse(row.scopes) as string[],
      createdWithSso: row.createdWithSso,
      role: row.role,
    }
  }
}

/** 403 unless the user is active in the organization. */
export function requireActiveUser(identity: TokenIdentity): void {
  if (identity.user.disabledAt !== null) throw forbidden('User is not authorized for the organization', 'user_deactivated')
}

/** The 403 checks of a project-scoped call, in DESIGN §4's order. */
export function authorizeProjectCall(identity: TokenIdentity, projectName: string, need: ProjectNeed): void {
  requireActiveUser(identity)
  requireTokenProject(identity, projectName)
  requireSsoWhenNeeded(identity)
  if (!hasScope(identity.scopes, need.scope)) throw forbidden(`Token lacks the ${need.scope} scope`, 'insufficient_scope')
  if (need.role && identity.role !== need.role) {
    throw forbidden(`The token's user must have the ${need.role} role on the project`, 'insufficient_role')
  }
}

/**
 * 403 unless the token was made for the named project. Names are compared before the project is looked up, so a
 * token of another project gets the same answer whether the project exists or not (and learns nothing of it).
 */
export function requireTokenProject(identity: TokenIdentity, projectName: string): void {
  if (identity.projectName !== projectName) throw forbidden('Token is not valid for this project', 'wrong_project')
}

export function requireSsoWhenNeeded(identity: TokenIdentity): void {
  if (identity.projectSso && !identity.createdWithSso) {
    throw forbidden('This project uses SSO: the token must be generated while logged in with SSO', 'sso_required')
  }
}
