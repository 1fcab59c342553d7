/** An application token's value: `trl_` + 32 random bytes base64url, shown once; only its SHA-256 is stored. */
import { createHash, randomBytes } from 'node:crypto'

export const TOKEN_PREFIX = 'trl_'
const TOKEN_VALUE = /^trl_[A-Za-z0-9_-]{43}$/

export function generateTokenValue(): string {
  return `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`
}

export function hashTokenValue(value: string): string {
  return createHash('sha256').update(value).digest('hex')
}

/** Cheap shape check before touching the database. */
export function looksLikeToken(value: string): boolean {
  return TOKEN_VALUE.test(value)
}
