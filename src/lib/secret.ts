/**
 * The instance secret: signs webhook URLs, and seals the SSO sign-in cookie under a key derived from it. From
 * TRELLIS_SECRET, else generated once into `<data>/secret` (0600).
 */
import { chmodSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { ensurePrivateDir } from './private-dir.ts'
import { join } from 'node:path'
import { hkdfSync, randomBytes } from 'node:crypto'

export const SECRET_FILE = 'secret'

export function loadInstanceSecret(dataDir: string, fromEnv?: string): Buffer {
  if (fromEnv) return Buffer.from(fromEnv, 'utf8')
  ensurePrivateDir(dataDir)
  const path = join(dataDir, SECRET_FILE)
  try {
    // 'wx' fails when the file exists, so two processes starting at once never overwrite each other's secret.
    writeFileSync(path, `${randomBytes(32).toString('base64url')}\n`, { flag: 'wx', mode: 0o600 })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
  }
  if ((statSync(path).mode & 0o077) !== 0) chmodSync(path, 0o600)
  const text = readFileSync(path, 'utf8').trim()
  if (text.length < 32) throw new Error(`instance secret in ${path} is too short; delete it to generate a new one`)
  return Buffer.from(text, 'utf8')
}

/**
 * A 256-bit key for one purpose, derived from the instance secret with HKDF-SHA256 (the purpose is HKDF's `info`):
 * two purposes never share a key, and none is the secret itself (which signs webhook URLs as it is).
 */
export function purposeKey(secret: Buffer, purpose: string): Uint8Array {
  return new Uint8Array(hkdfSync('sha256', secret, 'trellis instance secret', purpose, 32))
}
