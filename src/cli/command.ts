/**
 * What every CLI command shares: its flags (parsed and listed in --help from one table), usage errors (exit 2),
 * failures (exit 1), the store opened around one transaction. Commands call services and the storage face's own
 * operations (src/db); they never query the database themselves (test/layers-cli.test.ts).
 */
import { parseArgs, type ParseArgsConfig } from 'node:util'
import { type Config, ConfigError, type ConfigFlags, FLAG_SETTINGS, loadConfig, type StoredSso } from '../config.ts'
import { openConfiguredStore } from '../db/connect.ts'
import type { Store } from '../db/store.ts'
import { readSnapshot } from '../db/read.ts'
import { writeNow } from '../db/write.ts'
import { servedBaseUrl } from '../lib/served-base-url.ts'
import { findProjectByName, type Project } from '../modules/directory/projects.ts'
import { findUserByEmail, type User } from '../modules/users/service.ts'
import type { Op } from '../db/op.ts'
import type { ProgressStream } from '../lib/progress.ts'

/** Wrong invocation: exit 2. */
export class UsageError extends Error {}
/** The command ran and could not do what was asked: exit 1. */
export class CommandError extends Error {}

export interface Io {
  out(text: string): void
  err(text: string): void
  readStdin(): Promise<string>
  /** Where a long command shows its progress (stderr): redrawn in place on a terminal, summary lines elsewhere. */
  progress: ProgressStream
}

/** What `serve` returns to main: the process keeps running until a signal stops it. */
export const KEEP_RUNNING = -1

export interface Command {
  summary: string
  /** The synopsis: one line per form of the command. */
  usage: string
  /** The flags it takes besides --data, --database-url and --help: what it parses and what its --help lists (one table). */
  flags: Flags
  /** `false` for a command that opens no configured database (`db copy` names both of its own): it takes neither --data nor --database-url. */
  storeFlags?: false
  run(argv: string[], io: Io): Promise<number>
}

export interface FlagSpec {
  type: 'string' | 'boolean'
  short?: string
  /** The value's name in help (FILE, EMAIL…); string flags only. */
  value?: string
  help: string
  /** A setting flag's environment variable and default (from config.ts's FLAG_SETTINGS). */
  env?: string
  default?: string
}

export type Flags = Record<string, FlagSpec>
type Options = NonNullable<ParseArgsConfig['options']>

export const stringFlag = (value: string, help: string, short?: string): FlagSpec => ({ type: 'string', value, help, short })
export const booleanFlag = (help: string): FlagSpec => ({ type: 'boolean', help })

function settingFlag(name: keyof typeof FLAG_SETTINGS, value: string, help: string, defaultText?: string): FlagSpec {
  return { type: 'string', value, help, env: FLAG_SETTINGS[name].env, default: defaultText ?? FLAG_SETTINGS[name].default }
}

/** The flags that set configuration, with their environment variables and defaults. */
export const SETTING_FLAGS = {
  data: settingFlag('data', 'DIR', 'data directory: trellis.db, secret, base-url'),
  'database-url': settingFlag('database-url', 'URL', 'keep all data in PostgreSQL instead (postgres://USER:PASSWORD@HOST/DB; prefer the env variable: flags show in ps)'),
  host: settingFlag('host', 'HOST', 'listen address'),
  port: settingFlag('port', 'PORT', 'listen port'),
  'base-url': settingFlag('base-url', 'URL', 'public URL of this server: webhook URLs, the setup link; recorded in DIR/base-url for the CLI'),
  'oidc-issuer': settingFlag('oidc-issuer', 'URL', 'OpenID Connect issuer for console sign-in (https; http only for localhost)'),
  'oidc-client-id': settingFlag('oidc-client-id', 'ID', 'client id registered at the issuer'),
  'oidc-client-secret-file': settingFlag('oidc-client-secret-file', 'FILE', 'file holding the client secret (never the secret itself on the command line)'),
  'audit-checkpoint-every': settingFlag('audit-checkpoint-every', 'N', 'sign a log\'s checkpoint once N of its entries are unsigned'),
  'audit-checkpoint-seconds': settingFlag('audit-checkpoint-seconds', 'SECONDS', 'sign a log\'s checkpoint once its oldest unsigned entry is this old'),
  'audit-witness-dir': settingFlag('audit-witness-dir', 'DIR', 'append every checkpoint to DIR/checkpoints.jsonl (outside the data directory: another disk or a mounted volume)'),
  'audit-witness-url': settingFlag('audit-witness-url', 'URL', 'POST every checkpoint there (Standard Webhooks, event audit.checkpoint)'),
  'oidc-auto-create': {
    type: 'boolean',
    help: 'create unknown users on their first SSO sign-in (verified email)',
    env: FLAG_SETTINGS['oidc-auto-create'].env,
    default: FLAG_SETTINGS['oidc-auto-create'].default,
  } satisfies FlagSpec,
}

/**
 * `--base-url` of the commands that print URLs: without it (and without TRELLIS_BASE_URL) they use the URL the
 * last `serve` of the data directory recorded (configFrom with `servedBaseUrl`), else the host/port default.
 */
export const PRINTED_BASE_URL_FLAG = settingFlag(
  'base-url',
  'URL',
  'public URL of the server, for the URLs printed',
  `the URL serve runs with (DIR/base-url), else ${FLAG_SETTINGS['base-url'].default} from ${FLAG_SETTINGS.host.env}/${FLAG_SETTINGS.port.env}`,
)

/** The flags of every command that opens the configured database: where that database is. */
const STORE_FLAGS: Flags = { data: SETTING_FLAGS.data, 'database-url': SETTING_FLAGS['database-url'] }
const HELP_FLAG: Flags = { help: { type: 'boolean', short: 'h', help: 'print this help' } }

/** The flags a command takes besides its own. */
const commonFlags = (command: Pick<Command, 'storeFlags'>): Flags => (command.storeFlags === false ? HELP_FLAG : { ...STORE_FLAGS, ...HELP_FLAG })

/** `trellis <command> --help`: the synopsis, what it does, and every flag it takes with its env variable and default. */
export function commandHelp(name: string, command: Command): string {
  const flags = Object.entries({ ...command.flags, ...commonFlags(command) })
  const left = flags.map(([flag, spec]) => `${spec.short ? `-${spec.short}, ` : '    '}--${flag}${spec.value ? ` ${spec.value}` : ''}`)
  const width = Math.max(...left.map((text) => text.length))
  const lines = flags.map(([, spec], i) => {
    const setting = spec.env ? ` (env ${spec.env}; default ${spec.default})` : ''
    return `  ${left[i]!.padEnd(width)}  ${spec.help}${setting}`
  })
  return [`Usage: ${command.usage}`, '', `trellis ${name}: ${command.summary}`, '', 'Flags:', ...lines].join('\n')
}

export interface Parsed {
  values: Record<string, string | boolean | undefined>
  positionals: string[]
}

/** `argv` parsed against `flags` and the common ones (`command`: pass the command when it sets `storeFlags`). */
export function parseFlags(argv: string[], flags: Flags, maxPositionals = 0, command: Pick<Command, 'storeFlags'> = {}): Parsed {
  const options: Options = {}
  for (const [name, spec] of Object.entries({ ...flags, ...commonFlags(command) })) options[name] = spec.short ? { type: spec.type, short: spec.short } : { type: spec.type }
  try {
    const { values, positionals } = parseArgs({ args: argv, options, strict: true, allowPositionals: true })
    if (positionals.length > maxPositionals) throw new UsageError(`unexpected argument: ${positionals[maxPositionals]}`)
    return { values: values as Parsed['values'], positionals }
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

/** The configuration from the setting flags given; `servedBaseUrl` for the commands that print URLs; `storedSso`: the apply file's SSO settings (serve reads them from the database). */
export function configFrom(parsed: Parsed, options: { servedBaseUrl?: boolean; storedSso?: StoredSso | null } = {}): Config {
  const flags: ConfigFlags = {}
  for (const key of Object.keys(FLAG_SETTINGS) as (keyof typeof FLAG_SETTINGS)[]) {
    const value = parsed.values[key]
    if (typeof value === 'string') flags[key] = value
    else if (value === true) flags[key] = 'true'
  }
  try {
    return loadConfig(flags, process.env, { ...(options.servedBaseUrl ? { servedBaseUrl } : {}), storedSso: options.storedSso ?? null })
  } catch (error) {
    if (error instanceof ConfigError) throw new UsageError(error.message)
    throw error
  }
}

/** Opens the configured database (migrated): PostgreSQL when a URL is set, else the data directory's file; runs `fn` with it, closes it. */
export async function withStore<T>(config: Config, fn: (store: Store) => T | Promise<T>): Promise<T> {
  const store = await openConfiguredStore(config)
  try {
    return await fn(store)
  } finally {
    await store.close()
  }
}

/**
 * `body`'s op in one write transaction of the data directory's database: everything it changes commits together or not
 * at all. The CLI's connection waits in the driver for another process's lock (docs/operations.md "Storage faults").
 */
export function inWriteTransaction<T>(config: Config, body: () => Op<T>): Promise<T> {
  return withStore(config, (store) => writeNow(store, body))
}

/** `body`'s op over one consistent snapshot of the data directory's database. */
export function inReadTransaction<T>(config: Config, body: () => Op<T>): Promise<T> {
  return withStore(config, (store) => readSnapshot(store, body()))
}

/** The project with this name, or exit 1 `unknown project NAME`. */
export function* requireProjectByName(name: string): Op<Project> {
  const project = yield* findProjectByName(name)
  if (!project) throw new CommandError(`unknown project ${name}`)
  return project
}

/** The user with this email, or exit 1 `unknown user EMAIL`. */
export function* requireUserByEmail(email: string): Op<User> {
  const user = yield* findUserByEmail(email)
  if (!user) throw new CommandError(`unknown user ${email}`)
  return user
}

/** First line of stdin, for `--password-stdin`. */
export async function readSecretLine(io: Io, what: string): Promise<string> {
  const line = (await io.readStdin()).split(/\r?\n/)[0] ?? ''
  if (line === '') throw new UsageError(`expected the ${what} on standard input`)
  return line
}
