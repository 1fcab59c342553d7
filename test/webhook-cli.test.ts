/** `trellis webhook show|enable|disable|regenerate|rate` against a test env's store, in real processes. */
import { afterAll, describe, expect, test } from 'bun:test'
import { processEnv, runCli, testEnv } from './helpers.ts'

const testbed = testEnv()
afterAll(() => testbed.cleanup())
const env = { TRELLIS_BASE_URL: 'https://trellis.example.com', ...processEnv(testbed) }
const target = ['--data', testbed.dataDir, '--project', 'Acme', '--environment', 'production', '--team', 'Support', '--workflow', 'Refund order']
const cli = (...args: string[]) => runCli(args, { env })

describe('trellis webhook', () => {
  test('show, disable (a pause), enable (same URL), regenerate (new URL), rate; usage errors', async () => {
    expect((await cli('apply', '-f', 'examples/acme.yaml', '--data', testbed.dataDir)).code).toBe(0)
    const shown = await cli('webhook', 'show', ...target)
    expect(shown.code).toBe(0)
    const url = shown.stdout.trim()
    expect(url).toMatch(/^https:\/\/trellis\.example\.com\/v1\/hooks\/[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/)

    expect((await cli('webhook', 'disable', ...target)).stdout).toContain('disabled')
    const hidden = await cli('webhook', 'show', ...target)
    expect(hidden.code).toBe(0)
    expect(hidden.stdout).toBe('')
    expect(hidden.stderr).toContain('disabled')
    expect((await cli('webhook', 'enable', ...target)).code).toBe(0)
    expect((await cli('webhook', 'show', ...target)).stdout.trim()).toBe(url)

    const regenerated = await cli('webhook', 'regenerate', ...target)
    expect(regenerated.code).toBe(0)
    expect(regenerated.stdout.trim()).not.toBe(url)
    expect((await cli('webhook', 'show', ...target)).stdout.trim()).toBe(regenerated.stdout.trim())

    const rate = await cli('webhook', 'rate', ...target, '--per-minute', '120')
    expect(rate.stdout).toContain('120/min')
    expect((await cli('webhook', 'rate', ...target, '--per-minute', 'default')).stdout).toContain('60/min (default)')

    const [badRate, noFlag, unknownWorkflow, unknownSub] = await Promise.all([
      cli('webhook', 'rate', ...target, '--per-minute', '0'),
      cli('webhook', 'show', '--data', testbed.dataDir, '--project', 'Acme'),
      cli('webhook', 'show', ...target.slice(0, -1), 'Nope'),
      cli('webhook', 'explode', ...target),
    ])
    expect(badRate.code).toBe(2)
    expect(noFlag.code).toBe(2)
    expect(noFlag.stderr).toContain('--environment')
    expect(unknownWorkflow.code).toBe(1)
    expect(unknownWorkflow.stderr).toContain('Nope')
    expect(unknownSub.code).toBe(2)
  }, 60_000)
})
