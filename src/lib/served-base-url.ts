/**
 * The public base URL `serve` runs with, recorded in `<data>/base-url` (0600) each time it starts, so that the
 * commands printing URLs (apply, webhook show|regenerate) print them under the running server's address rather
 * than a guessed one. Only a hint for the CLI: the server itself never reads it.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs'
import { ensurePrivateDir } from './private-dir.ts'
import { join } from 'node:path'

export const BASE_URL_FILE = 'base-url'

/** Written beside, then renamed over: a reader sees the old URL or the new one, never half of one. */
export function recordServedBaseUrl(dataDir: string, baseUrl: string): void {
  ensurePrivateDir(dataDir)
  const path = join(dataDir, BASE_URL_FILE)
  const partial = `${path}.${process.pid}.partial`
  writeFileSync(partial, `${baseUrl}\n`, { mode: 0o600 })
  renameSync(partial, path)
}

/** The URL the last `serve` of this data directory ran with, or undefined when none has run yet. */
export function servedBaseUrl(dataDir: string): string | undefined {
  try {
    return readFileSync(join(dataDir, BASE_URL_FILE), 'utf8').trim() || undefined
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }
}
