/** The CLI in real processes (`bun src/main.ts …`, DESIGN §9): exit 0 ok, 1 failure, 2 usage; errors on stderr. */
import { afterAll, describe, expect, test } from 'bun:test'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import pkg from '../package.json' with { type: 'json' }
import { type ApplyReport } from '../src/modules/apply/service.ts'
import { runCli as runCliInProcess } from '../src/main.ts'
import { type CliResult, freePort, processEnv, queryAll, repoRoot, runCli as runCliProcess, SQLITE_ONLY, sqliteOnlyTest, startServe, tableContents, tempDir, testEnv, type TestEnv } from './helpers.ts'

const ACME = join(repoRoot, 'examples/acme.yaml')
/**
 * A test here starts up to a dozen `trellis` processes (about a second of CPU each to load the app): on a 2-core machine
 * busy with other work that is more than 30 s. What the tests check is each command's answer, not its speed.
 */
const TIMEOUT = 90_000

const envs = new Map<string, TestEnv>()
afterAll(() => {
  for (const env of envs.values()) env.cleanup()
}, 60_000) // on PostgreSQL each env drops its database through psql: more than bun's 5 s on a loaded machine

/** A test env's data directory (SQLite: its migrated file; PostgreSQL: the env's database goes with it, see `runCli`). */
function dataDir(): string {
  const env = testEnv()
  envs.set(env.dataDir, env)
  return env.dataDir
}

/** The environment a process on data directory `dir` needs: its test env's database (`processEnv`), if any. */
const storeEnv = (dir: string): Record<string, string> => {
  const env = envs.get(dir)
  return env === undefined ? {} : processEnv(env)
}

/** The real CLI in a process (helpers' `runCli`), on the test env whose data directory its `--data` names. */
function runCli(args: string[], options: Parameters<typeof runCliProcess>[1] = {}): Promise<CliResult> {
  const data = args.indexOf('--data')
  return runCliProcess(args, { ...options, env: { ...(data < 0 ? {} : storeEnv(args[data + 1]!)), ...options.env } })
}

/** Reads the data directory's database in this process (the CLI process has exited). */
function readDb<T>(dir: string, read: (query: (sql: string) => unknown[]) => T): T {
  return read((sql) => queryAll(envs.get(dir)!.store, sql))
}

const snapshot = (dir: string) => JSON.stringify(tableContents(envs.get(dir)!.store))

describe('trellis without a command', () => {
  test(
    'help, version, no arguments, unknown command',
    async () => {
      const [help, none, unknown, version, commandHelp, copyHelp, copyWithData, ...prototypeNames] = await Promise.all([
        runCli(['--help']),
        runCli([]),
        runCli(['frobnicate']),
        runCli(['--version']),
        runCli(['apply', '--help']),
        runCli(['db', '--help']),
        runCli(['db', 'copy', '--data', '/tmp', '--from', '/tmp', '--to', 'postgres://localhost/none']),
        runCli(['constructor']),
        runCli(['toString', '--help']),
      ])
      expect(help.code).toBe(0)
      for (const command of ['serve', 'migrate', 'apply', 'user', 'member']) expect(help.stdout).toMatch(new RegExp(`^  ${command} `, 'm'))
      // Where the data is: both flags, and the one command that takes neither (db copy names both its databases).
      expect(help.stdout).toContain('Every command but db takes --data DIR')
      expect(help.stdout).toContain('--database-url URL (or $TRELLIS_DATABASE_URL)')
      expect(copyHelp.stdout).toContain('--from FILE')
      expect(copyHelp.stdout).not.toContain('--data')
      expect(copyHelp.stdout).not.toContain('--database-url')
      expect(copyWithData.code).toBe(2)
      expect(copyWithData.stderr).toContain("Unknown option '--data'")
      expect(help.stderr).toBe('')

      expect(none.code).toBe(2)
      expect(none.stdout).toBe('')
      expect(none.stderr).toContain('Usage: trellis <command>')

      expect(unknown.code).toBe(2)
      expect(unknown.stdout).toBe('')
      expect(unknown.stderr).toContain('unknown command "frobnicate"')
      // Names of Object.prototype members are unknown commands too.
      for (const [i, name] of ['constructor', 'toString'].entries()) {
        expect({ code: prototypeNames[i]!.code, stdout: prototypeNames[i]!.stdout }).toEqual({ code: 2, stdout: '' })
        expect(prototypeNames[i]!.stderr).toContain(`unknown command "${name}"`)
      }

      expect(version.code).toBe(0)
      expect(version.stdout.trim()).toBe(pkg.version)

      expect(commandHelp.code).toBe(0)
      expect(commandHelp.stdout).toContain('trellis apply -f FILE')
      expect(commandHelp.stdout).toContain('--database-url URL')
    },
    TIMEOUT,
  )
})

describe('trellis migrate', () => {
  sqliteOnlyTest(
    SQLITE_ONLY.newDataDir,
    'twice is fine; an unknown flag is a usage error',
    async () => {
      const newDir = tempDir('trellis-cli-')
      const dir = newDir.path
      const first = await runCli(['migrate', '--data', dir])
      expect(first).toMatchObject({ code: 0, stderr: '' })
      expect(first.stdout).toContain('applied')
      // TRELLIS_DATA_DIR stands in for --data.
      const second = await runCli(['migrate'], { env: { TRELLIS_DATA_DIR: dir } })
      expect(second).toMatchObject({ code: 0, stdout: 'database is up to date\n', stderr: '' })

      const flag = await runCli(['migrate', '--data', dir, '--frobnicate'])
      expect(flag.code).toBe(2)
      expect(flag.stderr).toContain('--frobnicate')
      expect(flag.stderr).toContain('Usage: trellis migrate')
      newDir.cleanup()
    },
    TIMEOUT,
  )
})

describe('output larger than a pipe holds', () => {
  test('reaches the reader whole before the process exits (a large `apply --json` report, `token list --json`)', async () => {
    // What every command does: print through processIo, then process.exit. Before, all but the first 128 KiB was
    // still queued for the pipe at exit and lost: `trellis apply --json | jq` of a large file read invalid JSON.
    const script = `import { processIo } from ${JSON.stringify(join(repoRoot, 'src/main.ts'))}; processIo.out('x'.repeat(500_000)); processIo.err('y'.repeat(300_000)); process.exit(0)`
    const proc = Bun.spawn([process.execPath, '-e', script], { stdout: 'pipe', stderr: 'pipe' })
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
    expect(code).toBe(0)
    expect(stdout).toBe(`${'x'.repeat(500_000)}\n`)
    expect(stderr).toBe(`${'y'.repeat(300_000)}\n`)
  })
})

describe('trellis apply', () => {
  test(
    'usage and unreadable files',
    async () => {
      const dir = dataDir()
      const [noFile, missing] = await Promise.all([
        runCli(['apply', '--data', dir]),
        runCli(['apply', '-f', join(dir, 'missing.yaml'), '--data', dir]),
      ])
      expect(noFile.code).toBe(2)
      expect(noFile.stderr).toContain('--file is required')
      expect(missing.code).toBe(1)
      expect(missing.stdout).toBe('')
      expect(missing.stderr).toContain('missing.yaml')
    },
    TIMEOUT,
  )

  test(
    'acme with --json, twice; a broken file changes nothing',
    async () => {
      const dir = dataDir()
      const args = ['apply', '-f', ACME, '--data', dir, '--json', '--base-url', 'https://trellis.example.com/']
      const first = await runCli(args)
      expect(first.stderr).toBe('')
      expect(first.code).toBe(0)
      const report = JSON.parse(first.stdout) as ApplyReport
      expect(report.created).toBeGreaterThan(0)
      expect(first.stdout).toMatch(/"https:\/\/trellis\.example\.com\/v1\/hooks\/[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}"/)
      const refund = report.workflows.find((w) => w.name === 'Refund order')!
      expect(refund.webhook.url).toStartWith('https://trellis.example.com/v1/hooks/')

      const second = await runCli(args)
      expect(second.code).toBe(0)
      const again = JSON.parse(second.stdout) as ApplyReport
      expect(again).toMatchObject({ created: 0, updated: 0, changes: [] })
      // The instance secret is kept in the data directory, so the URL does not change between processes.
      expect(again.workflows.find((w) => w.name === 'Refund order')!.webhook.url).toBe(refund.webhook.url)

      const before = snapshot(dir)
      const broken = join(dir, 'broken.yaml')
      writeFileSync(
        broken,
        readFileSync(ACME, 'utf8').replace('members: [carol@example.com, dave@example.com]', 'members: [carol@example.com, eve@example.com]'),
      )
      const failed = await runCli(['apply', '-f', broken, '--data', dir, '--json'])
      expect(failed.code).toBe(1)
      expect(failed.stdout).toBe('')
      expect(failed.stderr).toContain('broken.yaml was not applied; nothing changed')
      expect(failed.stderr).toContain('projects[0].teams[1].members[1]: unknown user eve@example.com')
      expect(snapshot(dir)).toBe(before)
    },
    TIMEOUT,
  )

  test(
    'reads the file from standard input with -f -; prints a summary without --json',
    async () => {
      const dir = dataDir()
      const yaml = 'users:\n  - { email: stdin@example.com, username: stdin }\nprojects:\n  - { name: Piped, environments: [production] }\n'
      const result = await runCli(['apply', '-f', '-', '--data', dir], { stdin: yaml })
      expect(result.stderr).toBe('')
      expect(result.code).toBe(0)
      expect(result.stdout).toContain('created   user stdin@example.com')
      expect(result.stdout).toContain('3 created, 0 updated, 0 unchanged')
      const rows = readDb(dir, (q) => [q('SELECT email FROM users'), q('SELECT name FROM projects'), q('SELECT name FROM environments')])
      expect(rows).toEqual([[{ email: 'stdin@example.com' }], [{ name: 'Piped' }], [{ name: 'production' }]])

      const broken = await runCli(['apply', '-f', '-', '--data', dir], { stdin: 'users: [{ email: x@example.com, usrname: x }]\n' })
      expect(broken.code).toBe(1)
      expect(broken.stdout).toBe('')
      expect(broken.stderr).toContain('users[0].usrname: unknown field')
    },
    TIMEOUT,
  )
})

describe('trellis user', () => {
  test(
    'create, duplicate, short password, disable, enable, set-password',
    async () => {
      const dir = dataDir()
      const password = 'a-long-enough-password\n'
      const created = await runCli(['user', 'create', '--email', 'X@example.com', '--username', 'x', '--password-stdin', '--data', dir], {
        stdin: password,
      })
      expect(created.stderr).toBe('')
      expect(created.code).toBe(0)
      expect(created.stdout).toContain('created user x@example.com')

      const [duplicate, short, disabled, unknown, noStdinFlag, badSub, noEmail, badEmail] = await Promise.all([
        runCli(['user', 'create', '--email', 'x@example.com', '--username', 'x2', '--data', dir]),
        runCli(['user', 'create', '--email', 'y@example.com', '--username', 'y', '--password-stdin', '--data', dir], { stdin: 'short\n' }),
        runCli(['user', 'disable', '--email', 'x@example.com', '--data', dir]),
        runCli(['user', 'disable', '--email', 'nobody@example.com', '--data', dir]),
        runCli(['user', 'set-password', '--email', 'x@example.com', '--data', dir]),
        runCli(['user', 'delete', '--email', 'x@example.com', '--data', dir]),
        runCli(['user', 'enable', '--data', dir]),
        runCli(['user', 'create', '--email', 'not-an-email', '--username', 'z', '--data', dir]),
      ])
      expect(duplicate.code).toBe(1)
      expect(duplicate.stderr).toContain('already exists')
      expect(short.code).toBe(1)
      expect(short.stderr).toContain('password must be at least 12 characters')
      expect(disabled.code).toBe(0)
      expect(disabled.stdout).toContain('disabled x@example.com')
      expect(unknown.code).toBe(1)
      expect(unknown.stderr).toContain('unknown user nobody@example.com')
      expect(noStdinFlag.code).toBe(2)
      expect(noStdinFlag.stderr).toContain('--password-stdin is required')
      expect(badSub.code).toBe(2)
      expect(noEmail.code).toBe(2)
      expect(noEmail.stderr).toContain('--email is required')
      expect(badEmail.code).toBe(1)
      expect(badEmail.stderr).toContain('not an email address')

      const state = () =>
        readDb(dir, (q) => q(`SELECT email, disabled_at AS "disabledAt", password_hash AS hash FROM users ORDER BY id`)) as {
          email: string
          disabledAt: number | null
          hash: string
        }[]
      const [afterDisable] = state()
      expect(state()).toHaveLength(1)
      expect(afterDisable!.disabledAt).not.toBeNull()
      expect(Bun.password.verifySync('a-long-enough-password', afterDisable!.hash)).toBe(true)

      const [enabled, newPassword] = await Promise.all([
        runCli(['user', 'enable', '--email', 'x@example.com', '--data', dir]),
        runCli(['user', 'set-password', '--email', 'x@example.com', '--password-stdin', '--data', dir], { stdin: 'another-long-password\n' }),
      ])
      expect(enabled.code).toBe(0)
      expect(newPassword.code).toBe(0)
      const [afterEnable] = state()
      expect(afterEnable!.disabledAt).toBeNull()
      expect(Bun.password.verifySync('another-long-password', afterEnable!.hash)).toBe(true)
    },
    TIMEOUT,
  )
})

describe('trellis member', () => {
  test(
    'set a role after apply; bad role and unknown project',
    async () => {
      const dir = dataDir()
      expect((await runCli(['apply', '-f', ACME, '--data', dir])).code).toBe(0)
      const [set, badRole, unknownProject, unknownUser] = await Promise.all([
        runCli(['member', 'set', '--project', 'Acme', '--user', 'bob@example.com', '--role', 'admin', '--data', dir]),
        runCli(['member', 'set', '--project', 'Acme', '--user', 'bob@example.com', '--role', 'owner', '--data', dir]),
        runCli(['member', 'set', '--project', 'Nope', '--user', 'bob@example.com', '--role', 'admin', '--data', dir]),
        runCli(['member', 'set', '--project', 'Acme', '--user', 'nobody@example.com', '--role', 'admin', '--data', dir]),
      ])
      expect(set.stderr).toBe('')
      expect(set.code).toBe(0)
      expect(set.stdout).toContain('bob@example.com is now admin in Acme')
      expect(badRole.code).toBe(2)
      expect(badRole.stderr).toContain('--role must be one of admin, developer, editor, user, manager')
      expect(unknownProject.code).toBe(1)
      expect(unknownProject.stderr).toContain('unknown project Nope')
      expect(unknownUser.code).toBe(1)
      expect(unknownUser.stderr).toContain('unknown user nobody@example.com')

      const role = readDb(dir, (q) =>
        q("SELECT m.role FROM project_members m JOIN users u ON u.id = m.user_id WHERE u.email = 'bob@example.com'"),
      )
      expect(role).toEqual([{ role: 'admin' }])
    },
    TIMEOUT,
  )
})

describe('every command knows its flags', () => {
  const COMMANDS = ['serve', 'migrate', 'apply', 'user', 'member', 'token', 'webhook', 'backup', 'restore']
  /** A flag in a help text: `--name` and the placeholder of its value, when it takes one. */
  const flagLines = (help: string) =>
    [...help.matchAll(/^\s+(?:-\w, )?--([a-z-]+)(?: (\S+))?\s{2,}(.*)$/gm)].map(([, name, value, text]) => ({ name: name!, value, text: text! }))

  test(
    '`--help` lists each flag with its environment variable and default, and exits 0',
    async () => {
      const helps = Object.fromEntries(await Promise.all(COMMANDS.map(async (name) => [name, await runCli([name, '--help'])] as const)))
      for (const name of COMMANDS) {
        const { code, stdout, stderr } = helps[name]!
        expect({ name, code, stderr }).toEqual({ name, code: 0, stderr: '' })
        expect(stdout).toContain(`Usage: trellis ${name}`)
        expect(stdout).toMatch(/--data DIR +.*\(env TRELLIS_DATA_DIR; default \.\/data\)/)
        expect(stdout).toMatch(/--database-url URL +.*\(env TRELLIS_DATABASE_URL; default the embedded SQLite database DIR\/trellis\.db\)/)
        expect(stdout).toMatch(/-h, --help/)
      }
      const serve = helps.serve!.stdout
      expect(serve).toMatch(/--host HOST +.*\(env TRELLIS_HOST; default 127\.0\.0\.1\)/)
      expect(serve).toMatch(/--port PORT +.*\(env TRELLIS_PORT; default 8080\)/)
      expect(serve).toMatch(/--base-url URL +.*\(env TRELLIS_BASE_URL; default http:\/\/HOST:PORT\)/)
      for (const name of ['apply', 'webhook']) {
        expect(helps[name]!.stdout).toMatch(/--base-url URL +.*\(env TRELLIS_BASE_URL; default the URL serve runs with .*else http:\/\/HOST:PORT/)
      }
      expect(helps.apply!.stdout).toMatch(/-f, --file FILE/)
      expect(flagLines(helps.token!.stdout).map((f) => f.name)).toEqual(['user', 'project', 'name', 'scopes', 'preset', 'expires-in', 'expires-at', 'json', 'data', 'database-url', 'help'])
      expect(flagLines(helps.webhook!.stdout).map((f) => f.name)).toEqual(['project', 'environment', 'team', 'workflow', 'per-minute', 'base-url', 'data', 'database-url', 'help'])
      // `backup FILE`'s own, then `backup drill`'s (docs/backup.md "The drill").
      expect(flagLines(helps.backup!.stdout).map((f) => f.name)).toEqual(['force', 'quiet', 'from', 'litestream-config', 'replica', 'max-age', 'json', 'data', 'database-url', 'help'])
      expect(flagLines(helps.restore!.stdout).map((f) => f.name)).toEqual(['to-time', 'into', 'litestream-config', 'replica', 'json', 'data', 'database-url', 'help'])
    },
    TIMEOUT,
  )

  test('every flag a --help lists is one the command parses (no drift between the two)', async () => {
    const quiet = { out: () => {}, err: () => {}, readStdin: async () => '', progress: { isTTY: false, write: () => {} } }
    for (const name of COMMANDS) {
      let help = ''
      await runCliInProcess([name, '--help'], { ...quiet, out: (text) => (help += text) })
      const flags = flagLines(help).filter((f) => f.name !== 'help')
      expect(flags.length).toBeGreaterThan(0)
      for (const flag of flags) {
        // The flag parses when the usage error is about the unknown one that follows it.
        let stderr = ''
        const sub = ['user', 'member', 'token', 'webhook'].includes(name) ? ['list'] : []
        const code = await runCliInProcess([name, ...sub, `--${flag.name}`, ...(flag.value ? ['x'] : []), '--not-a-flag'], { ...quiet, err: (text) => (stderr += text) })
        expect({ name, flag: flag.name, code, unknown: /Unknown option '([^']+)'/.exec(stderr)?.[1] }).toEqual({ name, flag: flag.name, code: 2, unknown: '--not-a-flag' })
      }
    }
  })
})

describe('URLs printed by the CLI are under the running server’s public base URL', () => {
  const webhookShow = (dir: string, sub = 'show', extra: string[] = [], env?: Record<string, string>) =>
    runCli(['webhook', sub, '--project', 'Acme', '--environment', 'production', '--team', 'Support', '--workflow', 'Refund order', '--data', dir, ...extra], { env })
  const applyUrls = async (dir: string) => {
    const applied = await runCli(['apply', '-f', ACME, '--json', '--data', dir])
    expect(applied.code).toBe(0)
    return (JSON.parse(applied.stdout) as ApplyReport).workflows.map((w) => w.webhook.url).filter((url): url is string => typeof url === 'string')
  }

  test(
    'serve records TRELLIS_BASE_URL, or its host and port; apply and webhook show|regenerate use it unless given --base-url / TRELLIS_BASE_URL',
    async () => {
      const dir = dataDir()
      expect((await runCli(['apply', '-f', ACME, '--data', dir])).code).toBe(0)

      const public1 = await startServe({ dataDir: dir, cwd: dir, env: { ...storeEnv(dir), TRELLIS_BASE_URL: 'https://trellis.example.com/' } })
      try {
        const urls = await applyUrls(dir)
        expect(urls.length).toBeGreaterThan(0)
        for (const url of urls) expect(url).toStartWith('https://trellis.example.com/v1/hooks/')
        const shown = await webhookShow(dir)
        expect(shown.stdout).toStartWith('https://trellis.example.com/v1/hooks/')
        const regenerated = await webhookShow(dir, 'regenerate')
        expect(regenerated.stdout).toStartWith('https://trellis.example.com/v1/hooks/')
        expect(regenerated.stdout).not.toBe(shown.stdout)
        // An explicit flag or variable still wins.
        expect((await webhookShow(dir, 'show', ['--base-url', 'http://other.example:9000'])).stdout).toStartWith('http://other.example:9000/v1/hooks/')
        expect((await webhookShow(dir, 'show', [], { TRELLIS_BASE_URL: 'http://env.example' })).stdout).toStartWith('http://env.example/v1/hooks/')
      } finally {
        await public1.stop()
      }

      // Without a base URL, serve's own host and port (not a guessed :8080).
      const local = await startServe({ dataDir: dir, cwd: dir, env: storeEnv(dir) })
      try {
        expect(local.url).not.toEndWith(':8080')
        expect((await webhookShow(dir)).stdout).toStartWith(`${local.url}/v1/hooks/`)
        for (const url of await applyUrls(dir)) expect(url).toStartWith(`${local.url}/v1/hooks/`)
      } finally {
        await local.stop()
      }
    },
    120_000, // two serve processes and six CLI runs: past a minute beside four browsers on two cores
  )

  test(
    'before any serve: the host/port default; the record is private (0600)',
    async () => {
      const dir = dataDir()
      expect((await runCli(['apply', '-f', ACME, '--data', dir])).code).toBe(0)
      const port = freePort()
      expect((await webhookShow(dir, 'show', [], { TRELLIS_PORT: String(port) })).stdout).toStartWith(`http://127.0.0.1:${port}/v1/hooks/`)
      const server = await startServe({ dataDir: dir, cwd: dir, env: storeEnv(dir) })
      await server.stop()
      const { statSync } = await import('node:fs')
      expect((statSync(join(dir, 'base-url')).mode & 0o777).toString(8)).toBe('600')
      expect(readFileSync(join(dir, 'base-url'), 'utf8').trim()).toBe(server.url)
    },
    60_000,
  )
})
