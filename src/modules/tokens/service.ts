/**
 * Application tokens (spec §2.6, §5; DESIGN §4): `trl_` + 32 random bytes base64url, shown once.
 * Only the SHA-256 of the value and a display prefix are stored.
 */
import { generateTokenValue, hashTokenValue } from '../../lib/token-value.ts'
import {
  findTokenById,
  insertTokenWithin,
  listTokenRows,
  lockLiveToken,
  revokeLiveToken,
  revokeTokensMadeBy,
  type TokenListRow,
  type TokenRow,
} from '../../db/tokens.ts'
import { conflict, invalidField, unauthorized } from '../../lib/errors.ts'
import { findUserById } from '../../db/users.ts'
import type { Clock } from '../../lib/clock.ts'
import { toIsoOrNull, toIso } from '../../lib/time.ts'
import { appendAdminLog } from '../admin-logs/service.ts'
import { userObject } from '../directory/users.ts'

import { SCOPES, type Scope } from '../../lib/access.ts'
import type { Op } from '../../db/op.ts'

export { hasScope, SCOPES, type Scope } from '../../lib/access.ts'

export const PRESETS = {
  'read-only': ['activity_logs:read', 'admin_logs:read', 'notes:read'],
  'read-write': ['all'],
} as const satisfies Record<string, readonly Scope[]>
export type Preset = keyof typeof PRESETS

/** Characters of the value kept for display (`trl_` + 8). */
export const DISPLAY_PREFIX_LENGTH = 12

export type { TokenListRow, TokenRow } from '../../db/tokens.ts'

export class TokenInputError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message)
  }
}

/** Scopes from an explicit list or a preset (default read-only); unknown names are an error naming them. */
export function resolveScopes(scopes: readonly string[] | undefined, preset: string | undefined): Scope[] {
  if (scopes !== undefined && preset !== undefined) throw new TokenInputError('scopes', 'give either scopes or preset, not both')
  if (preset !== undefined) {
    if (!Object.hasOwn(PRESETS, preset)) throw new TokenInputError('preset', `unknown preset "${preset}" (one of ${Object.keys(PRESETS).join(', ')})`)
    return [...PRESETS[preset as Preset]]
  }
  if (scopes === undefined) return [...PRESETS['read-only']]
  if (scopes.length === 0) throw new TokenInputError('scopes', 'at least one scope is required')
  const unknown = scopes.filter((s) => !SCOPES.includes(s as Scope))
  if (unknown.length > 0) throw new TokenInputError('scopes', `unknown scope ${unknown.map((s) => `"${s}"`).join(', ')} (one of ${SCOPES.join(', ')})`)
  return [...new Set(scopes as Scope[])]
}

export const MAX_EXPIRY_DAYS = 3650

/** `expiresAt` (ISO, already parsed to ms) or `expiresInDays`; none means the token does not expire. */
export function resolveExpiry(now: number, expiresAt: number | undefined, expiresInDays: number | undefined): number | null {
  if (expiresAt !== undefined && expiresInDays !== undefined) {
    throw new TokenInputError('expiresAt', 'give either expiresAt or expiresInDays, not both')
  }
  if (expiresInDays !== undefined) {
    if (!Number.isInteger(expiresInDays) || expiresInDays < 1 || expiresInDays > MAX_EXPIRY_DAYS) {
      throw new TokenInputError('expiresInDays', `expiresInDays must be a whole number from 1 to ${MAX_EXPIRY_DAYS}`)
    }
    return now + expiresInDays * 86_400_000
  }
  if (expiresAt !== undefined) {
    if (expiresAt <= now) throw new TokenInputError('expiresAt', 'expiresAt must be in the future')
    if (expiresAt > now + MAX_EXPIRY_DAYS * 86_400_000) throw new TokenInputError('expiresAt', `expiresAt must be within ${MAX_EXPIRY_DAYS} days`)
    return expiresAt
  }
  return null
}

export interface NewToken {
  name: string
  userId: number
  projectId: number
  scopes: Scope[]
  expiresAt: number | null
  createdWithSso: boolean
  /** Who created it (the owner, or an operator through the CLI: null). */
  actorId: number | null
  /** The token that made it (a Bearer call); its expiry must come from `expiryUnderMaker`. */
  madeBy?: number | null
  /** Live tokens the user may hold at most, this one included (TRELLIS_LIVE_TOKENS_PER_USER). */
  maxLiveTokens: number
}

/**
 * The expiry of a token that token `makerId` makes: none asked → the maker's own (none when it has none); later than
 * the maker's → 400 naming `field`, the one that asked for it. The maker must still be live (else 401, as its next
 * call would get), and stays locked until the new token commits, so a revocation of it revokes the new one too
 * (lockLiveToken). Call in the write transaction that creates the token.
 */
export function* expiryUnderMaker(clock: Clock, makerId: number, asked: number | null, field: 'expiresAt' | 'expiresInDays' | null): Op<number | null> {
  const maker = yield* lockLiveToken(makerId, clock.now())
  if (!maker) throw unauthorized('Token has been revoked')
  if (asked === null || field === null) return maker.expiresAt
  if (maker.expiresAt !== null && asked > maker.expiresAt) {
    throw invalidField(field, `${field} must be no later than ${toIso(maker.expiresAt)}, when the token making this one expires`)
  }
  return asked
}

/**
 * Creates a token and its admin log entry; returns the row and the value (the only time it exists). 409
 * `too_many_tokens` when its user holds `maxLiveTokens` live tokens already. Every token is made here: the API (and
 * the console through it) and `trellis token create`. Call in a write transaction.
 */
export function* createToken(clock: Clock, input: NewToken): Op<{ token: TokenRow; value: string }> {
  const value = generateTokenValue()
  const token = yield* insertTokenWithin({
    name: input.name,
    userId: input.userId,
    projectId: input.projectId,
    tokenHash: hashTokenValue(value),
    prefix: value.slice(0, DISPLAY_PREFIX_LENGTH),
    scopes: JSON.stringify(input.scopes),
    createdWithSso: input.createdWithSso,
    createdAt: clock.now(),
    expiresAt: input.expiresAt,
    parentTokenId: input.madeBy ?? null,
  }, input.maxLiveTokens)
  if (!token) {
    throw conflict(
      'too_many_tokens',
      `The user holds ${input.maxLiveTokens} live tokens already, the most one user may hold (TRELLIS_LIVE_TOKENS_PER_USER): revoke one first`,
    )
  }
  yield* appendAdminLog(clock, {
    projectId: input.projectId,
    type: 'add',
    resource: 'api-token',
    actorId: input.actorId,
    subjectUserId: input.userId,
    newValue: { name: (yield* describeToken(token)) },
  })
  return { token, value }
}

/**
 * Revokes a live token and every token it made, to the end, in this transaction, each with its admin log entry;
 * false when it was already revoked. Call in a write transaction.
 */
export function* revokeToken(clock: Clock, token: TokenRow, actorId: number | null): Op<boolean> {
  const now = clock.now()
  if (!(yield* revokeLiveToken(token.id, now))) return false
  // Every row first, then the log entries: on PostgreSQL an entry takes its project's log lock, which a token being
  // made holds while it waits for nothing — but a revocation holding it while waiting for such a token's maker's row
  // would deadlock with it.
  const made = yield* revokeTokensMadeBy(token.id, now)
  yield* logRevocation(clock, token, actorId, '')
  const revokedWith = `, revoked with ${token.name} (${token.prefix}…), from which it was made`
  for (const each of made) yield* logRevocation(clock, each, actorId, revokedWith)
  return true
}

function* logRevocation(clock: Clock, token: TokenRow, actorId: number | null, why: string): Op<void> {
  yield* appendAdminLog(clock, {
    projectId: token.projectId,
    type: 'remove',
    resource: 'api-token',
    actorId,
    subjectUserId: token.userId,
    previousValue: { name: `${yield* describeToken(token)}${why}` },
  })
}

/**
 * Admin log values must fit the compatibility document's `{name}` shape: the token as one readable text.
 * Never the value or its hash — only the display prefix.
 */
function* describeToken(token: TokenRow): Op<string> {
  const owner = yield* findUserById(token.userId)
  const sso = token.createdWithSso ? ', generated in an SSO session' : ''
  return `${token.name} (${token.prefix}…) of ${owner?.email ?? `user ${token.userId}`}, scopes ${JSON.parse(token.scopes).join(' ')}${sso}`
}

export function* findToken(id: number): Op<TokenRow | undefined> {
  return yield* findTokenById(id)
}

/**
 * Tokens, newest first: a user's (account settings), a project's (API access settings) or both filters (CLI).
 * Revoked ones only when asked (the CLI shows them; the API lists live tokens).
 */
export function* listTokens(filter: { userId?: number; projectId?: number; includeRevoked?: boolean }): Op<TokenListRow[]> {
  return yield* listTokenRows(filter)
}

/** The public view of a token: never the value or its hash. */
export function tokenView(row: TokenListRow) {
  const t = row.token
  return {
    id: t.id,
    name: t.name,
    prefix: t.prefix,
    projectName: row.projectName,
    scopes: JSON.parse(t.scopes) as Scope[],
    createdAt: toIso(t.createdAt),
    lastUsedAt: toIsoOrNull(t.lastUsedAt),
    expiresAt: toIsoOrNull(t.expiresAt),
    createdWithSso: t.createdWithSso,
  }
}

/** Project admins' view adds the owner. */
export function projectTokenView(row: TokenListRow) {
  return { ...tokenView(row), user: userObject(row.owner) }
}

/** What `trellis token list --json` prints (DESIGN §9). */
export function cliTokenView(row: TokenListRow) {
  const { projectName: _projectName, createdWithSso: _sso, ...view } = tokenView(row)
  return { ...view, user: row.owner.email, project: row.projectName, revokedAt: toIsoOrNull(row.token.revokedAt) }
}
