/**
 * The audit trail's signing key (docs/audit.md "The signing key"): Ed25519, derived from the instance secret with
 * HKDF-SHA256, never stored. Every instance that shares the secret signs alike, and a restored backup with its secret
 * signs on where it left off; rotating the secret starts a new key (old checkpoints verify with the old public key).
 * Node's crypto does the curve: the 32-byte seed becomes a PKCS#8 private key by its fixed DER prefix (RFC 8410).
 */
import { createHash, createHmac, createPrivateKey, createPublicKey, hkdfSync, type KeyObject, sign, verify } from 'node:crypto'

/** HKDF's `info` for the signing key's seed: a new version of the derivation gets a new key, never the old one changed. */
export const AUDIT_KEY_INFO = 'trellis audit signing key v1'

/** PKCS#8 for an Ed25519 private key, up to its 32-byte seed (RFC 8410 §7). */
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex')

/** The public key as a JWK (RFC 8037): what `GET /v1/audit/public-key` answers and `trellis audit key` prints. */
export interface AuditPublicJwk {
  kty: 'OKP'
  crv: 'Ed25519'
  /** The raw public key, base64url. */
  x: string
  /** The key's id: the first 16 hex digits of SHA-256 of the raw public key; every checkpoint names it. */
  kid: string
}

export interface AuditSigningKey {
  /** An Ed25519 signature of `bytes`, base64url. */
  sign(bytes: Uint8Array | string): string
  publicJwk: AuditPublicJwk
}

/** The instance's signing key, derived from its secret (the same secret always gives the same key). */
export function auditSigningKey(instanceSecret: Buffer): AuditSigningKey {
  const seed = Buffer.from(hkdfSync('sha256', instanceSecret, 'trellis instance secret', AUDIT_KEY_INFO, 32))
  const privateKey = createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' })
  const publicJwk = jwkOf(createPublicKey(privateKey))
  return {
    sign: (bytes) => sign(null, toBytes(bytes), privateKey).toString('base64url'),
    publicJwk,
  }
}

/** Whether `signature` (base64url) is `publicJwk`'s signature of `bytes`; false for any malformed input. */
export function verifyAuditSignature(publicJwk: AuditPublicJwk, bytes: Uint8Array | string, signature: string): boolean {
  try {
    const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: publicJwk.x }, format: 'jwk' })
    return verify(null, toBytes(bytes), key, Buffer.from(signature, 'base64url'))
  } catch {
    return false
  }
}

/** What is wrong with a JWK read from a file or a request, or null when it is an Ed25519 public key. */
export function auditJwkProblem(value: unknown): string | null {
  if (typeof value !== 'object' || value === null) return 'is not a JSON object'
  const jwk = value as Record<string, unknown>
  if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519') return 'is not an Ed25519 key (kty OKP, crv Ed25519)'
  if (typeof jwk.x !== 'string' || Buffer.from(jwk.x, 'base64url').length !== 32) return 'has no 32-byte x'
  if (jwk.kid !== undefined && jwk.kid !== auditKeyId(Buffer.from(jwk.x, 'base64url'))) return 'has a kid that is not its key\'s'
  return null
}

/** The JWK with its kid as derived (a key file without one gets it). */
export function auditJwkOf(value: { x: string }): AuditPublicJwk {
  return { kty: 'OKP', crv: 'Ed25519', x: value.x, kid: auditKeyId(Buffer.from(value.x, 'base64url')) }
}

/**
 * The signing secret of the `audit.checkpoint` callbacks (Standard Webhooks' `whsec_` form): HMAC-SHA256 of the instance
 * secret, for this purpose alone; printed by `trellis audit key --witness-secret` for the receiver.
 */
export function auditWitnessSecret(instanceSecret: Buffer): string {
  return `whsec_${createHmac('sha256', instanceSecret).update('audit witness callbacks v1').digest('base64')}`
}

function jwkOf(publicKey: KeyObject): AuditPublicJwk {
  const { x } = publicKey.export({ format: 'jwk' }) as { x: string }
  return auditJwkOf({ x })
}

const auditKeyId = (raw: Buffer) => createHash('sha256').update(raw).digest('hex').slice(0, 16)

const toBytes = (bytes: Uint8Array | string) => (typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes)
