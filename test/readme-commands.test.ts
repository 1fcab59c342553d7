/**
 * Every command the README shows runs as written: each ```sh block of README.md, in order, by bash,
 * against a real `serve` on a fresh data directory, each block failing on its first failing command. The blocks run
 * in a directory standing in for the reader's checkout (the checkout's `src`, `examples`, `node_modules` and
 * `package.json` linked into a temp directory), so `./data` and the walkthrough's `my-acme.yaml` land there, never in
 * the checkout. Two things are rewritten, as a reader would: the address (`http://127.0.0.1:8080` → the test server's,
 * on a free port) and the setup block's `<token>` (the one this server printed). Also: docs/command-line.md's command
 * table names each command and every flag it takes, and no flag it does not.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { readFileSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import { repoRoot, runCli, type ServeProcess, startServe, tempDir } from './helpers.ts'

/**
 * Lines not run, each with why: what a reader runs to install, serve and test. The test starts that same server itself
 * (`npm start` is `bun src/main.ts serve`) on a free port; `npm ci` is done (this is a checkout with its modules);
 * `npm test` is the suite this test is part of. Any other `npm` line in a block fails the test.
 */
export const EXEMPT_LINES: Record<string, string> = {
  'npm ci && npm start': 'the test starts `bun src/main.ts serve` (npm start) itself, on a temp directory and a free port',
  'npm ci && npm test': 'the whole suite, which this test is part of',
}

const README_ADDRESS = 'http://127.0.0.1:8080'

interface Block {
  /** Line of the opening fence in README.md. */
  line: number
  script: string
}

/** Every ```sh block of a Markdown text, with where it starts. */
function shBlocks(markdown: string): Block[] {
  const blocks: Block[] = []
  for (const match of markdown.matchAll(/^```sh\n([\s\S]*?)^```$/gm)) {
    blocks.push({ line: markdown.slice(0, match.index).split('\n').length, script: match[1]! })
  }
  return blocks
}

/** A block's lines as run: exempt lines left out; an `npm` line that is not exempt throws. */
function runnable(block: Block): string {
  return block.script
    .split('\n')
    .filter((line) => {
      const command = line.replace(/\s+#.*$/, '').trim()
      if (command in EXEMPT_LINES) return false
      if (/^npm\b/.test(command)) throw new Error(`README.md:${block.line}: "${command}" is neither run by this test nor in EXEMPT_LINES`)
      return true
    })
    .join('\n')
}

async function bash(script: string, cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn(['bash', '-c', `set -eo pipefail\ntrap 'echo "failed ($?): $BASH_COMMAND" >&2' ERR\n${script}`], {
    cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp' },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  return { code, stdout, stderr }
}

describe('the README’s commands', () => {
  const checkout = tempDir('trellis-readme-commands-')
  let server: ServeProcess

  beforeAll(async () => {
    for (const entry of ['src', 'examples', 'node_modules', 'package.json']) symlinkSync(join(repoRoot, entry), join(checkout.path, entry))
    server = await startServe({ dataDir: join(checkout.path, 'data'), cwd: checkout.path })
  }, 30_000)
  afterAll(async () => {
    await server.stop()
    checkout.cleanup()
  })

  test('every sh block runs as written, in order, against a real serve', async () => {
    const blocks = shBlocks(readFileSync(join(repoRoot, 'README.md'), 'utf8'))
    expect(blocks.length).toBeGreaterThanOrEqual(5)
    const setupToken = /\/setup\?token=(\S+)/.exec(await server.waitForOutput('/setup?token='))?.[1]
    expect(setupToken).toBeDefined()
    const outputs: string[] = []
    for (const block of blocks) {
      const script = runnable(block).replaceAll(README_ADDRESS, server.url).replaceAll('<token>', setupToken!)
      if (script.trim() === '') continue
      const result = await bash(script, checkout.path)
      if (result.code !== 0) throw new Error(`README.md:${block.line}: the block failed (exit ${result.code})\n${result.stderr}\n${result.stdout}`)
      outputs.push(result.stdout)
    }
    const all = outputs.join('\n')
    // What each step says it does.
    expect(all).toContain('"email":"admin@example.com"') // the setup link's first administrator
    expect(all).toContain('created   workflow Acme/production/Support/Refund order')
    expect(all).toContain('published workflow Acme/production/Support/Refund order')
    expect(all).toContain(`Refund order v2: ${server.url}/v1/hooks/`)
    expect(all).toContain('{"status":"ok"}')
    expect(all).toContain('{"status":"ready"}')
    expect(all).toMatch(/^trellis_/m)
    expect(all).toContain('"code":"run_in_progress"')
    expect(all).toContain('"action":"triggerWorkflow"')
    // The example stays as it is: the walkthrough edits its copy.
    expect(readFileSync(join(checkout.path, 'my-acme.yaml'), 'utf8')).toContain('title: Refund issued')
    expect(readFileSync(join(repoRoot, 'examples/acme.yaml'), 'utf8')).toContain('title: Refund\n')
  }, 120_000)
})

describe('docs/command-line.md’s command table', () => {
  const table = readFileSync(join(repoRoot, 'docs/command-line.md'), 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('| `'))
  /** The command forms of the table's first column: `user disable\|enable --email E` · `user set-password …`. */
  const forms = table.flatMap((row) => [...row.split(/(?<!\\)\|/)[1]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!.replaceAll('\\|', '|')))
  const tableFlags = (command: string) => new Set(forms.filter((form) => form.split(' ')[0] === command).flatMap((form) => form.match(/(?<![\w-])--?[a-z][a-z-]*/g) ?? []))

  test('names every command with every flag it takes, and no other', async () => {
    const top = await runCli(['--help'])
    const commands = [...top.stdout.matchAll(/^ {2}([a-z]+) {2,}/gm)].map((m) => m[1]!)
    expect(commands.length).toBeGreaterThan(5)
    const helps = await Promise.all(commands.map(async (command) => (await runCli([command, '--help'])).stdout))
    const problems: string[] = []
    for (const [i, command] of commands.entries()) {
      const help = helps[i]!
      // `-f, --file FILE` → both spellings; the table may use either.
      const taken = [...help.matchAll(/^ {2}(?:(-[a-z]), )? *(--[a-z-]+)/gm)].map((m) => ({ short: m[1], long: m[2]! }))
      const listed = tableFlags(command)
      if (!forms.some((form) => form.split(' ')[0] === command)) problems.push(`${command}: no row`)
      for (const flag of listed) if (!taken.some((t) => t.long === flag || t.short === flag)) problems.push(`${command}: the table shows ${flag}, which it does not take`)
      for (const { short, long } of taken) {
        // --help is everyone's; --data and --database-url are said once above the table.
        if (['--help', '--data', '--database-url'].includes(long)) continue
        if (!listed.has(long) && !(short && listed.has(short))) problems.push(`${command}: takes ${long}, not in the table`)
      }
    }
    expect(problems).toEqual([])
  }, 60_000)
})
