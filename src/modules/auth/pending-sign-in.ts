/**
 * A sign-in in progress, sealed into the browser's own `trellis_sso` cookie rather than kept by the instance that
 * started it: so the provider's redirect back may reach any instance behind a load balancer. Sealed with jose as a
 * compact JWE (`dir`, A256GCM: authenticated encryption) under a key derived from the instance secret for this one
 * purpose; only an instance holding the same secret opens it, and nobody reads (the PKCE verifier, the nonce) or
 * alters it. Its expiry is the JWT's `exp`, checked by jose against Trellis's clock.
 */
import { EncryptJWT, errors, jwtDecrypt } from 'jose'

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
  return new EncryptJWT({ state, codeVerifier, nonce, next })
    .setProtectedHeader(HEADER)
    .setExpirationTime(Math.floor(pending.expiresAt / 1000))
    .encrypt(key)
}

/**
 * The sign-in sealed in `value`; `unreadable` when it does not open under `key` (altered, truncated, or sealed with
 * another secret), `expired` when it opens but its time is up.
 */
export async function openSignIn(key: Uint8Array, value: string, now: number): Promise<PendingSignIn | 'unreadable' | 'expired'> {
  try {
    const { payload } = await jwtDecrypt(value, key, {
      keyManagementAlgorithms: [HEADER.alg],
      contentEncryptionAlgorithms: [HEADER.enc],
      currentDate: new Date(now),
      clockTolerance: 0,
      requiredClaims: ['exp'],
    })
    const { state, codeVerifier, nonce, next, exp } = payload
    if (typeof state !== 'string' || typeof codeVerifier !== 'string' || typeof nonce !== 'string' || typeof next !== 'string') return 'unreadable'
    return { state, codeVerifier, nonce, next, expiresAt: exp! * 1000 }
  } catch (error) {
    // The cookie is the browser's to send: whatever fails to open (jose's JWEInvalid, JWEDecryptionFailed…) is refused.
    return error instanceof errors.JWTExpired ? 'expired' : 'unreadable'
  }
}
