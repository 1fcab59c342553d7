/**
 * `trellis audit key|export|verify` (docs/audit.md): the signing key's public half (and the witness callbacks' secret),
 * a log's signed export, and the chain's verification.
 */
import { closeSync, existsSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import { type AuditPublicJwk, auditJwkOf, auditJwkProblem, auditSigningKey, auditWitnessSecret } from '../lib/audit-key.ts'
import { readWitnessFile } from '../lib/audit-witness-file.ts'
import { FLAG_SETTINGS } from '../config.ts'
import { newestWitnessed, storedClaims } from '../modules/audit/claims.ts'
import { NotAnExport, verifyExport } from '../modules/audit/export-verify.ts'
import { printVerdict, runVerify, VERIFY_FLAGS } from './audit-verify.ts'
import { HttpError } from '../lib/errors.ts'
import { loadInstanceSecret, SECRET_FILE } from '../lib/secret.ts'
import { readSnapshot } from '../db/read.ts'
import { ExportOptionError, exportLines, exportScope } from '../modules/audit/export.ts'
import { booleanFlag, type Command, CommandError, configFrom, type Parsed, parseFlags, required, stringFlag, UsageError, withStore } from './command.ts'
import type { Io } from './command.ts'
import type { Config } from '../config.ts'

const SUBCOMMANDS = ['key', 'export', 'verify'] as const

export const auditCommand: Command = {
  summary: 'the audit trail: print the public key (`key`), write a log\'s signed export (`export`), verify the chains (`verify`)',
  usage: [
    'trellis audit key [--out FILE] [--witness-secret]',
    '       trellis audit export --project P [--log activity|admin] [--environment E] [--from T] [--to T] [--out FILE]',
    '       trellis audit verify [--project P] [--log activity|admin] [--witness FILE|DIR] [--key FILE] [--json] [--quiet]',
    '       trellis audit verify --export FILE [--key FILE] [--json]',
  ].join('\n'),
  flags: {
    out: stringFlag('FILE', 'key: write the public key (JWK) to FILE; export: write the export to FILE (default: standard output)'),
    'witness-secret': booleanFlag('key: print the signing secret of the audit.checkpoint callbacks (whsec_…) instead, for the receiver'),
    ...VERIFY_FLAGS,
    project: stringFlag('NAME', 'export: the project; verify: only this project\'s chains (its environments\' activity logs, its admin log)'),
    log: stringFlag('LOG', 'export: activity (an environment\'s, the default with --environment) or admin (the project\'s, the default without); verify: only the activity or the admin logs'),
    environment: stringFlag('NAME', 'export: the environment (the activity log)'),
    from: stringFlag('TIME', 'export: entries created at or after this ISO 8601 time'),
    to: stringFlag('TIME', 'export: entries created before this ISO 8601 time'),
    witness: stringFlag('FILE|DIR', 'verify: a witness file (or its directory): each chain\'s head is compared with the newest checkpoint it holds'),
    key: stringFlag('FILE', 'verify: the public key (JWK) checkpoints are checked with (default: derived from the instance secret, when there is one)'),
    export: stringFlag('FILE', 'verify: an export file (`trellis audit export`) instead of the database'),
  },
  async run(argv, io) {
    const parsed = parseFlags(argv, this.flags, 1)
    const sub = parsed.positionals[0]
    if (sub === 'key') return keyCommand(parsed, io)
    if (sub === 'export') return exportCommand(parsed, io)
    if (sub === 'verify') return verifyCommand(parsed, io)
    throw new UsageError(`which audit command? one of ${SUBCOMMANDS.join(', ')}`)
  },
}

/** The instance secret the configuration names (TRELLIS_SECRET, else the data directory's file). */
const secretOf = (config: Config) => loadInstanceSecret(config.dataDir, config.secretFromEnv)

/**
 * The public key verify checks signatures with: `--key FILE`, else the one the configured instance secret derives (never
 * made up: a data directory without its secret has none), else null.
 */
function verifyKey(parsed: Parsed, config: Config): AuditPublicJwk | null {
  const file = parsed.values.key
  if (typeof file === 'string') {
    let value: unknown
    try {
      value = JSON.parse(readFileSync(file, 'utf8'))
    } catch (error) {
      throw new UsageError(`--key ${file}: cannot read a JWK (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`)
    }
    const problem = auditJwkProblem(value)
    if (problem) throw new UsageError(`--key ${file} ${problem}`)
    return auditJwkOf(value as { x: string })
  }
  return hasInstanceSecret(config) ? auditSigningKey(secretOf(config)).publicJwk : null
}

/** Whether the configuration has an instance secret already (TRELLIS_SECRET, or the data directory's file): verify and export never make one up. */
const hasInstanceSecret = (config: Config) => config.secretFromEnv !== undefined || existsSync(join(config.dataDir, SECRET_FILE))

/** `verify`: the stored chains (./audit-verify.ts) with their signed claims, or an export file. */
async function verifyCommand(parsed: Parsed, io: Io): Promise<number> {
  const config = configFrom(parsed)
  const key = verifyKey(parsed, config)
  const exportFile = parsed.values.export
  if (typeof exportFile === 'string') {
    for (const flag of ['witness', 'project', 'log'] as const) if (parsed.values[flag] !== undefined) throw new UsageError(`--${flag} is for the database's chains, not --export`)
    let report
    try {
      report = await verifyExport(exportFile, key)
    } catch (error) {
      if (error instanceof NotAnExport) throw new CommandError(`${exportFile} is not an export: ${error.message}`)
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new CommandError(`no file ${exportFile}`)
      throw error
    }
    if (report.key === 'export') io.err('no --key and no instance secret: checked with the export\'s own key, which proves the file whole, not whose it is')
    return printVerdict(parsed, io, report)
  }
  const witnessPath = parsed.values.witness
  if (key === null) {
    if (typeof witnessPath === 'string') throw new UsageError('--witness needs the public key its checkpoints were signed with: --key FILE (`trellis audit key --out FILE` where the instance runs)')
    io.err(`no --key and no instance secret (${FLAG_SETTINGS.data.env}/secret or TRELLIS_SECRET): the links are checked, the signed checkpoints and anchors are not`)
  }
  let witnessed = null
  if (typeof witnessPath === 'string') {
    try {
      const { checkpoints, unreadable } = readWitnessFile(witnessPath)
      if (unreadable > 0) io.err(`${witnessPath}: ${unreadable} line(s) that are not checkpoints were skipped`)
      witnessed = newestWitnessed(checkpoints)
    } catch (error) {
      throw new CommandError(`cannot read the witness ${witnessPath} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`)
    }
  }
  return runVerify(parsed, io, (_config, store) => storedClaims(store, key, witnessed))
}

function keyCommand(parsed: Parsed, io: Io): number {
  const config = configFrom(parsed)
  const secret = secretOf(config)
  if (parsed.values['witness-secret'] === true) {
    if (parsed.values.out !== undefined) throw new UsageError('--out writes the public key; --witness-secret prints the secret on standard output')
    io.out(auditWitnessSecret(secret))
    return 0
  }
  const jwk = JSON.stringify(auditSigningKey(secret).publicJwk)
  const out = parsed.values.out
  if (typeof out === 'string') {
    writeWhole(out, `${jwk}\n`)
    io.out(resolve(out))
  } else {
    io.out(jwk)
  }
  return 0
}

async function exportCommand(parsed: Parsed, io: Io): Promise<number> {
  const config = configFrom(parsed)
  const project = required(parsed, 'project')
  const option = (name: string) => (typeof parsed.values[name] === 'string' ? (parsed.values[name] as string) : undefined)
  // The export's last checkpoint is signed as it is written: with the instance's own key, or not at all.
  if (!hasInstanceSecret(config)) throw new CommandError(`no instance secret to sign the export with: run it where the instance's secret is (${FLAG_SETTINGS.data.env}/secret or TRELLIS_SECRET)`)
  const key = auditSigningKey(secretOf(config))
  return withStore(config, async (store) => {
    let scope
    try {
      scope = await readSnapshot(store, exportScope(project, { log: option('log'), environment: option('environment'), from: option('from'), to: option('to') }))
    } catch (error) {
      if (error instanceof ExportOptionError) throw new UsageError(`--${error.option} ${error.rule}`)
      if (error instanceof HttpError) throw new CommandError(error.message)
      throw error
    }
    const lines = exportLines(store, key, scope, () => Date.now())
    const out = option('out')
    if (out === undefined) {
      for await (const line of lines) io.out(line)
      return 0
    }
    // Into a file beside FILE, renamed over it at the end: an export cut short never leaves a FILE that looks whole.
    const target = resolve(out)
    const partial = join(dirname(target), `.${basename(target)}.partial-${process.pid}`)
    const fd = openSync(partial, 'w', 0o600)
    let entries = 0
    try {
      for await (const line of lines) {
        writeSync(fd, `${line}\n`)
        if (line.startsWith('{"type":"entry"')) entries++
      }
    } catch (error) {
      closeSync(fd)
      rmSync(partial, { force: true })
      throw error
    }
    closeSync(fd)
    renameSync(partial, target)
    io.out(`${target} (${entries} entries)`)
    return 0
  })
}

/** `text` written to `path` whole: into a file beside it, renamed over it. */
function writeWhole(path: string, text: string): void {
  const target = resolve(path)
  const partial = join(dirname(target), `.${basename(target)}.partial-${process.pid}`)
  const fd = openSync(partial, 'w', 0o644)
  try {
    writeSync(fd, text)
  } finally {
    closeSync(fd)
  }
  renameSync(partial, target)
}
