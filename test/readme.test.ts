/**
 * The README walkthrough's API block, run literally by bash from the checkout against a real `serve` (only `B=` is
 * pointed at the test's port): it works as written and leaves no untracked file in the checkout.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { repoRoot, runCli, type ServeProcess, startServe, tempDir } from './helpers.ts'

/** The first ```sh block after `heading` in the README. */
function readmeBlock(heading: string): string {
  const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8')
  const at = readme.indexOf(heading)
  if (at < 0) throw new Error(`README has no "${heading}"`)
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(at))
  if (!block) throw new Error(`README has no sh block after "${heading}"`)
  return block[1]!
}

async function untrackedFiles(): Promise<string> {
  const git = Bun.spawn(['git', 'status', '--porcelain', '--untracked-files=all'], { cwd: repoRoot, stdout: 'pipe', stderr: 'pipe' })
  const [out, code] = await Promise.all([new Response(git.stdout).text(), git.exited])
  if (code !== 0) throw new Error('git status failed: the README test needs a git checkout')
  return out
    .split('\n')
    .filter((line) => line.startsWith('??'))
    .sort()
    .join('\n')
}

describe('README walkthrough', () => {
  const data = tempDir('trellis-readme-')
  let server: ServeProcess
  const env = () => ({ TRELLIS_DATA_DIR: data.path, TRELLIS_PORT: new URL(server.url).port })

  beforeAll(async () => {
    server = await startServe({ dataDir: data.path, cwd: data.path })
    const applied = await runCli(['apply', '-f', join(repoRoot, 'examples/acme.yaml'), '--data', data.path, '--base-url', server.url])
    expect(applied.code).toBe(0)
  }, 60_000) // a serve and an apply: more than the default 5 s on a loaded machine
  afterAll(async () => {
    await server.stop()
    data.cleanup()
  })

  test('the integrator block runs as written and leaves no untracked file in the checkout', async () => {
    const block = readmeBlock('Now use the API as an integrator would')
    expect(block).toContain('B=http://127.0.0.1:8080\n')
    const script = block.replace('B=http://127.0.0.1:8080\n', `B=${server.url}\n`)
    const before = await untrackedFiles()
    const bash = Bun.spawn(['bash', '-c', script], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env() },
      stdout: 'pipe',
      stderr: 'pipe',
    })
    const [out, err, code] = await Promise.all([new Response(bash.stdout).text(), new Response(bash.stderr).text(), bash.exited])
    expect(err.replace(/^npm warn .*\n/gm, '')).toBe('')
    expect(code).toBe(0)
    expect(out).toContain('"object":"note"')
    expect(out).toContain('"code":"run_in_progress"')
    expect(out).toContain('"object":"workflow-run"')
    expect(out).toContain('"action":"triggerWorkflow"')
    expect(await untrackedFiles()).toBe(before)
  }, 60_000)
})
