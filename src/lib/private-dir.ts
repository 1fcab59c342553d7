/**
 * The data directory holds the database (password and token hashes), the instance secret and backups: its owner's
 * only (0700), whether this process creates it or finds it made wider by hand or by an older version.
 */
import { chmodSync, mkdirSync, statSync } from 'node:fs'

export type PrivateDirOutcome =
  | { kind: 'private' }
  /** It was wider (`was`, e.g. 0o755) and is now 0700. */
  | { kind: 'narrowed'; was: number }
  /** It is wider and this process may not change it (another user's directory). */
  | { kind: 'left-open'; mode: number }

/** Creates `dir` 0700 when absent; narrows it to 0700 when group or others have any access. */
export function ensurePrivateDir(dir: string): PrivateDirOutcome {
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const mode = statSync(dir).mode & 0o777
  if ((mode & 0o077) === 0) return { kind: 'private' }
  try {
    chmodSync(dir, mode & 0o700)
    return { kind: 'narrowed', was: mode }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') throw error
    return { kind: 'left-open', mode }
  }
}

/** `0o755` as `0755`, as `ls` and `chmod` spell it. */
export const octal = (mode: number) => `0${mode.toString(8)}`
