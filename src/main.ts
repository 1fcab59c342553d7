#!/usr/bin/env bun
/** Entry point of the one binary: `trellis <command> [flags]`. Exit 0 ok, 1 failure, 2 usage. */
import { writeSync } from 'node:fs'
import pkg from '../package.json' with { type: 'json' }
import { applyCommand } from './cli/apply.ts'
import { auditCommand } from './cli/audit.ts'
import { backupCommand } from './cli/backup.ts'
import { dbCommand } from './cli/db.ts'
import { type Command, CommandError, commandHelp, type Io, KEEP_RUNNING, UsageError } from './cli/command.ts'
import { FLAG_SETTINGS, passwordHashingOf } from './config.ts'
import { memberCommand } from './cli/member.ts'
import { migrateCommand } from './cli/migrate.ts'
import { recordsCommand } from './cli/records.ts'
import { restoreCommand } from './cli/restore.ts'
import { serveCommand } from './cli/serve-command.ts'
import { tokenCommand } from './cli/token.ts'
import { userCommand } from './cli/user.ts'
import { webhookCommand } from './cli/webhook.ts'
import { usePasswordHashing } from './modules/users/service.ts'

const COMMANDS: Record<string, Command> = {
  serve: serveCommand,
  migrate: migrateCommand,
  apply: applyCommand,
  user: userCommand,
  member: memberCommand,
  token: tokenCommand,
  webhook: webhookCommand,
  records: recordsCommand,
  backup: backupCommand,
  restore: restoreCommand,
  db: dbCommand,
  audit: auditCommand,
}

export function helpText(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((name) => name.length))
  const apart = Object.entries(COMMANDS).flatMap(([name, command]) => (command.storeFlags === false ? [name] : []))
  return [
    `Trellis ${pkg.version} — back-office collaboration and workflows in one executable.`,
    '',
    'Usage: trellis <command> [flags]',
    '',
    'Commands:',
    ...Object.entries(COMMANDS).map(([name, command]) => `  ${name.padEnd(width)}  ${command.summary}`),
    '',
    `Every command${apart.length ? ` but ${apart.join(', ')}` : ''} takes --data DIR (default $${FLAG_SETTINGS.data.env} or ${FLAG_SETTINGS.data.default}) and`,
    `--database-url URL (or $${FLAG_SETTINGS['database-url'].env}): with a URL the data is in PostgreSQL, not DIR/trellis.db.`,
    'Run `trellis <command> --help` for its flags. `trellis --version` prints the version.',
  ].join('\n')
}

/**
 * Writes all of `text` to `fd` before returning. `process.stdout.write` hands a pipe what it takes at once (64–128 KiB)
 * and queues the rest, which the `process.exit` below dropped: `trellis apply --json | jq` on a large file got a
 * truncated report. A pipe that is non-blocking (EAGAIN) is waited for.
 */
function writeAll(fd: number, text: string): void {
  let bytes = Buffer.from(text)
  while (bytes.length > 0) {
    try {
      bytes = bytes.subarray(writeSync(fd, bytes))
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error
      Bun.sleepSync(1)
    }
  }
}

export const processIo: Io = {
  out: (text) => writeAll(1, `${text}\n`),
  err: (text) => writeAll(2, `${text}\n`),
  readStdin: () => Bun.stdin.text(),
  progress: {
    isTTY: process.stderr.isTTY === true,
    get columns() {
      return process.stderr.columns
    },
    write: (text) => writeAll(2, text),
  },
}

export async function runCli(argv: string[], io: Io = processIo): Promise<number> {
  const [name, ...rest] = argv
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    ;(name === undefined ? io.err : io.out)(helpText())
    return name === undefined ? 2 : 0
  }
  if (name === '--version' || name === '-v' || name === 'version') {
    io.out(pkg.version)
    return 0
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined
  if (!command) {
    io.err(`trellis: unknown command "${name}"\n\n${helpText()}`)
    return 2
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    io.out(commandHelp(name, command))
    return 0
  }
  try {
    return await command.run(rest, io)
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`trellis ${name}: ${error.message}\n\nUsage: ${command.usage}\n(trellis ${name} --help lists every flag)`)
      return 2
    }
    if (error instanceof CommandError) {
      io.err(`trellis ${name}: ${error.message}`)
      return 1
    }
    io.err(`trellis ${name}: ${error instanceof Error ? error.message : String(error)}`)
    return 1
  }
}

if (import.meta.main) {
  usePasswordHashing(passwordHashingOf(process.env))
  const code = await runCli(process.argv.slice(2))
  // `serve` keeps running; every other command ends here.
  if (code !== KEEP_RUNNING) process.exit(code)
}
