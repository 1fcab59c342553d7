/** The audit trail's signing key (src/lib/audit-key.ts): derived from the instance secret, Ed25519, its JWK and kid. */
import { describe, expect, test } from 'bun:test'
import { createHash, createPublicKey, verify } from 'node:crypto'
import { auditJwkOf, auditJwkProblem, auditSigningKey, auditWitnessSecret, verifyAuditSignature } from '../src/lib/audit-key.ts'

const secret = Buffer.from('a-test-instance-secret-of-enough-length-0123456789')

describe('auditSigningKey', () => {
  test('the same secret gives the same key; another secret another', () => {
    const a = auditSigningKey(secret)
    const b = auditSigningKey(Buffer.from(secret))
    expect(a.publicJwk).toEqual(b.publicJwk)
    expect(auditSigningKey(Buffer.from('another-secret-of-enough-length-0123456789')).publicJwk.x).not.toBe(a.publicJwk.x)
    // Ed25519 signatures are deterministic: two instances sharing the secret sign alike.
    expect(a.sign('hello')).toBe(b.sign('hello'))
  })

  test('the JWK is an Ed25519 public key, its kid the first 16 hex of SHA-256 of the raw key', () => {
    const { publicJwk } = auditSigningKey(secret)
    expect(publicJwk.kty).toBe('OKP')
    expect(publicJwk.crv).toBe('Ed25519')
    const raw = Buffer.from(publicJwk.x, 'base64url')
    expect(raw.length).toBe(32)
    expect(publicJwk.kid).toBe(createHash('sha256').update(raw).digest('hex').slice(0, 16))
    expect(Object.keys(publicJwk)).toEqual(['kty', 'crv', 'x', 'kid'])
    expect(auditJwkProblem(publicJwk)).toBeNull()
  })

  test('a signature verifies with the public key alone (here and with any Ed25519 implementation), not once a byte changed', () => {
    const key = auditSigningKey(secret)
    const signature = key.sign('{"v":1}')
    expect(verifyAuditSignature(key.publicJwk, '{"v":1}', signature)).toBe(true)
    expect(verifyAuditSignature(key.publicJwk, '{"v":2}', signature)).toBe(false)
    const other = auditSigningKey(Buffer.from('another-secret-of-enough-length-0123456789'))
    expect(verifyAuditSignature(other.publicJwk, '{"v":1}', signature)).toBe(false)
    expect(verifyAuditSignature(key.publicJwk, '{"v":1}', 'not a signature')).toBe(false)
    const publicKey = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: key.publicJwk.x }, format: 'jwk' })
    expect(verify(null, Buffer.from('{"v":1}'), publicKey, Buffer.from(signature, 'base64url'))).toBe(true)
  })

  test('a key file is checked: kind, size, a kid that is its own', () => {
    const { publicJwk } = auditSigningKey(secret)
    expect(auditJwkProblem(null)).toMatch(/object/)
    expect(auditJwkProblem({ kty: 'RSA' })).toMatch(/Ed25519/)
    expect(auditJwkProblem({ kty: 'OKP', crv: 'Ed25519', x: 'AAAA' })).toMatch(/32-byte/)
    expect(auditJwkProblem({ ...publicJwk, kid: '0000000000000000' })).toMatch(/kid/)
    const { kid: _kid, ...withoutKid } = publicJwk
    expect(auditJwkProblem(withoutKid)).toBeNull()
    expect(auditJwkOf(withoutKid)).toEqual(publicJwk)
  })

  test('the witness callbacks\' secret is a Standard Webhooks secret of its own', () => {
    expect(auditWitnessSecret(secret)).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/)
    expect(auditWitnessSecret(secret)).toBe(auditWitnessSecret(Buffer.from(secret)))
  })
})
