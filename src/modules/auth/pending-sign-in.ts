/**
 * A sign-in in progress, sealed into the browser's own `trellis_sso` cookie rather than kept by the instance that
 * started it: so the provider's redirect back may reach any instance behind a load balancer. Sealed with jose as a
 * compact JWE (`dir`, A256GCM: authenticated encryption) under a key derived from the instance secret for this one
 * purpose; only an instance holding the same secret opens it, and nobody reads (the PKCE verifier, the nonce) or
 * alters it. Its expiry is the JWT's `exp`, checked by jose against Trellis's clock. A sign-in waiting to be linked
 * to an existing account (PendingLink) is sealed the same way, under its own key, in the `trellis_sso_link` cookie.
 */
import { EncryptJWT, errors, jwtDecrypt, type JWTPayload } from 'jose'

export interface PendingSignIn {
  state: string
  codeVerifier: string
  nonce: string
  /** Where to go once signed in: a path on this site (safeNext), at most MAX_NEXT_LENGTH characters. */
  next: string
  expiresAt: number
}

/** The HKDF label of the sealing key (see purposeKey): never the webhook-signing key. */
export const SIGN_IN_COOKIE_PURPOSE = 'trellis sso sign-in cookie v1'
/** Keeps the cookie far below the 4 KB browsers keep (about 1.8 KB at most); a longer `next` leads to `/`. */
export const MAX_NEXT_LENGTH = 1024

const HEADER = { alg: 'dir', enc: 'A256GCM' } as const

export function sealSignIn(key: Uint8Array, pending: PendingSignIn): Promise<string> {
  const { state, codeVerifier, nonce, next } = pending
  return seal(key, { state, codeVerifier, nonce, next }, pending.expiresAt)
}

/**
 * The sign-in sealed in `value`; `unreadable` when it does not open under `key` (altered, truncated, or sealed with
 * another secret), `expired` when it opens but its time is up.
 */
export async function openSignIn(key: Uint8Array, value: string, now: number): Promise<PendingSignIn | 'unreadable' | 'expired'> {
  const payload = await open(key, value, now)
  if (typeof payload === 'string') return payload
  const { state, codeVerifier, nonce, next, exp } = payload
  if (typeof state !== 'string' || typeof codeVerifier !== 'string' || typeof nonce !== 'string' || typeof next !== 'string') return 'unreadable'
  return { state, codeVerifier, nonce, next, expiresAt: exp! * 1000 }
}

/**
 * An SSO sign-in that found a Trellis account with the provider's verified email but not this provider account bound
 * to it (src/modules/auth/oidc-service.ts): held in the browser's `trellis_sso_link` cookie until the person links it
 * with their password (POST /auth/sso/link), sealed as the sign-in is, under a key of its own.
 */
export interface PendingLink {
  issuer: string
  subject: string
  /** The account the verified email named: the only one the password may link it to. */
  userId: number
  email: string
  next: string
  expiresAt: number
}

export const LINK_COOKIE_PURPOSE = 'trellis sso link cookie v1'

export function sealLink(key: Uint8Array, pending: PendingLink): Promise<string> {
  const { issuer, subject, userId, email, next } = pending
  return seal(key, { issuer, subject, userId, email, next }, pending.expiresAt)
}

export async function openLink(key: Uint8Array, value: string, now: number): Promise<PendingLink | 'unreadable' | 'expired'> {
  const payload = await open(key, value, now)
  if (typeof payload === 'string') return payload
  const { issuer, subject, userId, email, next, exp } = payload
  if (typeof issuer !== 'string' || typeof subject !== 'string' || typeof userId !== 'number' || typeof email !== 'string' || typeof next !== 'string') return 'unreadable'
  return { issuer, subject, userId, email, next, expiresAt: exp! * 1000 }
}

function seal(key: Uint8Array, payload: JWTPayload, expiresAt: number): Promise<string> {
  return new EncryptJWT(payload).setProtectedHeader(HEADER).setExpirationTime(Math.floor(expiresAt / 1000)).encrypt(key)
}

async function open(key: Uint8Array, value: string, now: number): Promise<JWTPayload | 'unreadable' | 'expired'> {
  try {
    const { payload } = await jwtDecrypt(value, key, {
      keyManagementAlgorithms: [HEADER.alg],
      contentEncryptionAlgorithms: [HEADER.enc],
      currentDate: new Date(now),
      clockTolerance: 0,
      requiredClaims: ['exp'],
    })
    return payload
  } catch (error) {
    // The cookie is the browser's to send: whatever fails to open (jose's JWEInvalid, JWEDecryptionFailed…) is refused.
    return error instanceof errors.JWTExpired ? 'expired' : 'unreadable'
  }
}
