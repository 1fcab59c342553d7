/**
 * The compiled single binary, as a self-hoster runs it: built with the project's own build flags into a temp
 * dir, started from another directory (no source tree in reach), migrating its embedded SQL, serving, applying
 * the example file while it serves, checkpointing the WAL on its checkpoint thread, backing up on its backup thread,
 * and stopping cleanly on SIGTERM.
 */
import { Database } from 'bun:sqlite'
import { afterAll, expect, test } from 'bun:test'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import pkg from '../package.json' with { type: 'json' }
import { freePort, repoRoot, tempDir } from './helpers.ts'

const dir = tempDir('trellis-binary-')
afterAll(() => dir.cleanup())

async function run(args: string[], cwd: string) {
  const proc = Bun.spawn(args, { cwd, env: { PATH: '/usr/bin:/bin', HOME: cwd }, stdout: 'pipe', stderr: 'pipe' })
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  return { stdout, stderr, code }
}

test('dist binary: builds, serves from any directory with --data elsewhere, applies, checkpoints and backs up on threads of their own, stops on SIGTERM', async () => {
  // The build script's own command line, pointed at the temp dir.
  const build = pkg.scripts.build.replace('dist/trellis', join(dir.path, 'trellis')).split(' ')
  const built = await run([process.execPath, ...build.slice(1)], repoRoot)
  expect(built.code).toBe(0)
  const binary = join(dir.path, 'trellis')
  const elsewhere = tempDir('trellis-cwd-')
  try {
    const version = await run([binary, '--version'], elsewhere.path)
    expect(version.stdout.trim()).toBe(pkg.version)

    const dataDir = join(dir.path, 'some', 'other', 'dir')
    const port = freePort()
    const server = Bun.spawn([binary, 'serve', '--data', dataDir, '--port', String(port)], {
      cwd: elsewhere.path,
      env: { PATH: '/usr/bin:/bin', HOME: elsewhere.path },
      stdout: 'pipe',
      stderr: 'pipe',
    })
    const base = `http://127.0.0.1:${port}`
    let healthy = false
    for (let i = 0; i < 100 && !healthy; i++) {
      healthy = await fetch(`${base}/healthz`).then((r) => r.ok, () => false)
      if (!healthy) await Bun.sleep(100)
    }
    expect(healthy).toBe(true)
    expect((await fetch(`${base}/readyz`)).status).toBe(200)
    expect(existsSync(join(dataDir, 'trellis.db'))).toBe(true)

    const applied = await run([binary, 'apply', '-f', join(repoRoot, 'examples/acme.yaml'), '--data', dataDir, '--json', '--base-url', base], elsewhere.path)
    expect(applied.code).toBe(0)
    const report = JSON.parse(applied.stdout) as { created: number; workflows: { webhook: { url: string | null } }[] }
    expect(report.created).toBeGreaterThan(20)
    const hook = report.workflows.find((w) => w.webhook.url)!.webhook.url!
    expect(hook.startsWith(`${base}/v1/hooks/`)).toBe(true)
    // The served binary sees what the CLI process wrote: the URL is genuine (401 without a token, not 400/404).
    expect((await fetch(hook, { method: 'POST', body: '{}' })).status).toBe(401)
    // The WAL those writes left is checkpointed by the binary's checkpoint thread (an extra entrypoint of the build).
    let checkpoints = 0
    for (let i = 0; i < 50 && checkpoints === 0; i++) {
      const metrics = await (await fetch(`${base}/metrics`)).text()
      checkpoints = Number(/^trellis_wal_checkpoints_total\{mode="passive",outcome="done"\} (\d+)$/m.exec(metrics)?.[1] ?? 0)
      if (checkpoints === 0) await Bun.sleep(100)
    }
    expect(checkpoints).toBeGreaterThan(0)
    // A backup while it serves, on the binary's backup thread (another extra entrypoint): a database that opens.
    const backupFile = join(elsewhere.path, 'backup.db')
    const backup = await run([binary, 'backup', backupFile, '--data', dataDir], elsewhere.path)
    expect({ code: backup.code, stderr: backup.stderr }).toEqual({ code: 0, stderr: expect.stringMatching(/^backup: [\d.]+ MB in /) })
    const copy = new Database(backupFile, { readonly: true })
    expect(copy.prepare("SELECT count(*) AS n FROM users WHERE email = 'alice@example.com'").get()).toEqual({ n: 1 })
    copy.close()

    server.kill('SIGTERM')
    expect(await server.exited).toBe(0)
    expect(await new Response(server.stderr).text()).not.toContain('checkpoint')
  } finally {
    elsewhere.cleanup()
  }
}, 60_000)
