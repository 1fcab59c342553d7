/**
 * What authentication asks the database, per request: a token by the hash of its value (with its user, project and
 * the user's role there now), and the throttled `lastUsedAt` stamp. Both prepared once per connection.
 */
import { and, eq, sql } from 'drizzle-orm'
import type { Db } from './open.ts'
import { prepared } from './prepared.ts'
import { apiTokens, projectMembers, projects, users } from './schema.ts'

const tokenByHash = (db: Db) =>
  prepared(db, 'auth.tokenByHash', () =>
    db
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
      .prepare(),
  )

const touchToken = (db: Db) =>
  prepared(db, 'auth.touchToken', () =>
    db
      .update(apiTokens)
      .set({ lastUsedAt: sql`${sql.placeholder('now')}` })
      .where(
        and(
          eq(apiTokens.id, sql.placeholder('id')),
          sql`(${apiTokens.lastUsedAt} is null or ${apiTokens.lastUsedAt} <= ${sql.placeholder('before')})`,
        ),
      )
      .prepare(),
  )

export type TokenAuthRow = ReturnType<ReturnType<typeof tokenByHash>['all']>[number]

/** The token whose value hashes to `hash`, with what the auth decision reads; undefined when unknown. */
export function findTokenByHash(db: Db, hash: string): TokenAuthRow | undefined {
  return tokenByHash(db).all({ hash })[0]
}

/** Stamps `lastUsedAt = now` unless it was stamped after `before` (never a write per request). */
export function touchTokenLastUsed(db: Db, tokenId: number, now: number, before: number): void {
  touchToken(db).run({ id: tokenId, now, before })
}
