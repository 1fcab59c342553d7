/**
 * install.sh in a temporary prefix with a stand-in binary: the files it writes, the systemd unit's text, a second
 * run that changes nothing (idempotent) and keeps the operator's config, then --uninstall. shellcheck runs on the
 * shell scripts when it is installed.
 */
import { describe, expect, test } from 'bun:test'
import { chmodSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { repoRoot, tempDir } from './helpers.ts'

async function run(command: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn(command, { cwd: repoRoot, stdout: 'pipe', stderr: 'pipe', stdin: 'ignore' })
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  return { code, stdout, stderr }
}

const install = (...args: string[]) => run(['bash', join(repoRoot, 'install.sh'), ...args])
const mode = (path: string) => statSync(path).mode & 0o777

describe('install.sh', () => {
  test('installs into a prefix, twice without change, keeps the config, uninstalls', async () => {
    const root = tempDir('trellis-install-')
    try {
      const prefix = join(root.path, 'stage')
      const binary = join(root.path, 'trellis-fake')
      writeFileSync(binary, '#!/bin/sh\necho "trellis (stand-in)"\n')
      chmodSync(binary, 0o755)

      const first = await install('--prefix', prefix, '--binary', binary)
      expect(first.stderr).toBe('')
      expect(first.code).toBe(0)
      const bin = join(prefix, 'usr/local/bin/trellis')
      const unit = join(prefix, 'etc/systemd/system/trellis.service')
      const envFile = join(prefix, 'etc/trellis/trellis.env')
      const dataDir = join(prefix, 'var/lib/trellis')
      expect(first.stdout).toContain(`installed: ${bin}`)
      expect(first.stdout).toContain(`installed: ${unit}`)
      expect(first.stdout).toContain(`created config ${envFile}`)
      expect(first.stdout).toContain(`created data directory ${dataDir}`)
      expect(first.stdout).toContain('systemctl daemon-reload && systemctl enable --now trellis')

      expect(readFileSync(bin, 'utf8')).toBe(readFileSync(binary, 'utf8'))
      expect(mode(bin)).toBe(0o755)
      expect(statSync(dataDir).isDirectory()).toBe(true)
      expect(mode(dataDir)).toBe(0o750)
      expect(mode(envFile)).toBe(0o600) // may hold TRELLIS_SECRET
      expect(readFileSync(envFile, 'utf8')).toContain('#TRELLIS_BASE_URL=')

      const text = readFileSync(unit, 'utf8')
      expect(mode(unit)).toBe(0o644)
      for (const line of [
        '[Unit]',
        'After=network-online.target',
        '[Service]',
        'Type=simple',
        'User=trellis',
        'EnvironmentFile=-/etc/trellis/trellis.env',
        'ExecStart=/usr/local/bin/trellis serve --data /var/lib/trellis',
        'Restart=on-failure',
        'KillSignal=SIGTERM',
        'KillMode=mixed',
        'TimeoutStopSec=30',
        'ReadWritePaths=/var/lib/trellis',
        'NoNewPrivileges=true',
        '[Install]',
        'WantedBy=multi-user.target',
      ]) {
        expect(text.split('\n'), line).toContain(line)
      }
      // The unit names the paths of the target machine, never the staging prefix.
      expect(text).not.toContain(prefix)

      // The operator edits the config; a second run changes nothing and keeps it.
      writeFileSync(envFile, 'TRELLIS_BASE_URL=https://trellis.example.com\n')
      const unitBefore = statSync(unit).mtimeMs
      const second = await install('--prefix', prefix, '--binary', binary)
      expect(second.code).toBe(0)
      expect(second.stdout).toContain(`unchanged: ${bin}`)
      expect(second.stdout).toContain(`unchanged: ${unit}`)
      expect(second.stdout).toContain(`kept existing config: ${envFile}`)
      expect(second.stdout).toContain(`data directory exists: ${dataDir} (kept)`)
      expect(readFileSync(envFile, 'utf8')).toBe('TRELLIS_BASE_URL=https://trellis.example.com\n')
      expect(statSync(unit).mtimeMs).toBe(unitBefore)

      // A new binary is an upgrade: replaced, the rest unchanged.
      writeFileSync(binary, '#!/bin/sh\necho "trellis (stand-in v2)"\n')
      const upgrade = await install('--prefix', prefix, '--binary', binary)
      expect(upgrade.code).toBe(0)
      expect(upgrade.stdout).toContain(`updated: ${bin}`)
      expect(readFileSync(bin, 'utf8')).toContain('v2')

      const removed = await install('--prefix', prefix, '--uninstall')
      expect(removed.code).toBe(0)
      expect(removed.stdout).toContain(`removed ${bin}`)
      expect(removed.stdout).toContain(`removed ${unit}`)
      expect(existsSync(bin)).toBe(false)
      expect(existsSync(unit)).toBe(false)
      expect(existsSync(dataDir)).toBe(true) // data and config are the operator's
      expect(existsSync(envFile)).toBe(true)
      const again = await install('--prefix', prefix, '--uninstall')
      expect(again.code).toBe(0)
      expect(again.stdout).toContain(`not present: ${bin}`)
    } finally {
      root.cleanup()
    }
  })

  test('usage errors exit 2; a binary that is not executable is refused', async () => {
    expect((await install('--bogus')).code).toBe(2)
    const root = tempDir('trellis-install-')
    try {
      const binary = join(root.path, 'not-executable')
      writeFileSync(binary, 'x')
      const refused = await install('--prefix', join(root.path, 'stage'), '--binary', binary)
      expect(refused.code).toBe(1)
      expect(refused.stderr).toContain('is not an executable file')
    } finally {
      root.cleanup()
    }
  })

  test('--litestream PATH installs Litestream beside Trellis; the config names its settings', async () => {
    const root = tempDir('trellis-install-')
    try {
      const prefix = join(root.path, 'stage')
      const binary = join(root.path, 'trellis-fake')
      const litestream = join(root.path, 'litestream-fake')
      for (const file of [binary, litestream]) {
        writeFileSync(file, `#!/bin/sh\necho ${file}\n`)
        chmodSync(file, 0o755)
      }
      const done = await install('--prefix', prefix, '--binary', binary, '--litestream', litestream)
      expect(done.code, done.stderr).toBe(0)
      const installed = join(prefix, 'usr/local/bin/litestream')
      expect(done.stdout).toContain(`installed: ${installed}`)
      expect(readFileSync(installed, 'utf8')).toBe(readFileSync(litestream, 'utf8'))
      expect(mode(installed)).toBe(0o755)
      expect(readFileSync(join(prefix, 'etc/trellis/trellis.env'), 'utf8')).toContain('#TRELLIS_LITESTREAM_CONFIG=')
      const refused = await install('--prefix', prefix, '--binary', binary, '--litestream', join(root.path, 'missing'))
      expect(refused.code).toBe(1)
      expect(refused.stderr).toContain('--litestream')
    } finally {
      root.cleanup()
    }
  })

  const shellcheck = Bun.which('shellcheck')
  if (!shellcheck) console.log('install.test.ts: shellcheck is not installed here; skipping the shellcheck assertion')
  test.skipIf(!shellcheck)('install.sh and .ci/run are shellcheck-clean', async () => {
    const result = await run([shellcheck!, join(repoRoot, 'install.sh'), join(repoRoot, '.ci/run')])
    expect(result.stdout + result.stderr).toBe('')
    expect(result.code).toBe(0)
  })
})
