/** What every CLI command shares: flag parsing (usage errors → exit 2), failures (exit 1), opening the store. */
import { parseArgs, type ParseArgsConfig } from 'node:util'
import { type Config, ConfigError, type ConfigFlags, loadConfig, type StoredSso } from '../config.ts'
import { migrate } from '../db/migrate.ts'
import { openStore, type Store } from '../db/open.ts'

/** Wrong invocation: exit 2. */
export class UsageError extends Error {}
/** The command ran and could not do what was asked: exit 1. */
export class CommandError extends Error {}

export interface Io {
  out(text: string): void
  err(text: string): void
  readStdin(): Promise<string>
}

export interface Command {
  summary: string
  usage: string
  run(argv: string[], io: Io): Promise<number>
}

type Options = NonNullable<ParseArgsConfig['options']>

const COMMON: Options = {
  data: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
}

export interface Parsed {
  values: Record<string, string | boolean | undefined>
  positionals: string[]
  help: boolean
}

export function parseFlags(argv: string[], options: Options, maxPositionals = 0): Parsed {
  try {
    const { values, positionals } = parseArgs({ args: argv, options: { ...COMMON, ...options }, strict: true, allowPositionals: true })
    if (positionals.length > maxPositionals) throw new UsageError(`unexpected argument: ${positionals[maxPositionals]}`)
    return { values: values as Parsed['values'], positionals, help: values.help === true }
  } catch (error) {
    if (error instanceof UsageError) throw error
    throw new UsageError((error as Error).message)
  }
}

/** A required string flag, or a usage error naming it. */
export function required(parsed: Parsed, name: string): string {
  const value = parsed.values[name]
  if (typeof value !== 'string' || value.trim() === '') throw new UsageError(`--${name} is required`)
  return value
}

/** `stored`: the apply file's SSO settings, read from the database by `serve` (the lowest layer). */
export function configFrom(parsed: Parsed, stored: StoredSso | null = null): Config {
  const flags: ConfigFlags = {}
  for (const key of ['data', 'host', 'port', 'base-url', 'oidc-issuer', 'oidc-client-id'] as const) {
    const value = parsed.values[key]
    if (typeof value === 'string') flags[key] = value
  }
  if (parsed.values['oidc-auto-create'] === true) flags['oidc-auto-create'] = 'true'
  try {
    return loadConfig(flags, process.env, stored)
  } catch (error) {
    if (error instanceof ConfigError) throw new UsageError(error.message)
    throw error
  }
}

/** Opens the data directory's database and brings its schema up to date. */
export function openMigrated(config: Config): Store {
  const store = openStore(config.dataDir)
  migrate(store.sqlite)
  return store
}

/** First line of stdin, for `--password-stdin`. */
export async function readSecretLine(io: Io, what: string): Promise<string> {
  const line = (await io.readStdin()).split(/\r?\n/)[0] ?? ''
  if (line === '') throw new UsageError(`expected the ${what} on standard input`)
  return line
}
