/**
 * `npm run screenshots`: the console's main pages as PNGs for the README and the manual, in docs/screenshots/, with
 * docs/screenshots/README.md listing them. A real `trellis serve` on a temp data directory with a copy of
 * examples/acme.yaml applied; Chromium (test/support/browser.ts) signed in as alice; one "Refund order" run started
 * and followed to its end so that the record, run and activity pages have something to show. Every page is reached
 * by its URL, never by clicking, so the script keeps working while the pages change: a page that is not 200, or
 * that has a script error, stops it. Viewport screenshots (not full pages), at the laptop size and a few at the phone's.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { repoRoot as root, runCli, startServe } from '../test/helpers.ts'
import { browserAvailable, CHROMIUM, launchBrowser, SCREENS, watchPage } from '../test/support/browser.ts'

const out = join(root, 'docs/screenshots')
const ALICE = { email: 'alice@example.com', password: 'alice-demo-pass-2026' }
const RECORD = '/p/Acme/e/production/t/Support/c/orders/r/ord_1001'

interface Shot {
  file: string
  title: string
  /** The page's path; `{runId}` is the run this script starts. */
  path: string
  screen: keyof typeof SCREENS
  /** A control clicked before the picture is taken (a tab), if any. */
  click?: string
}

/** The pages, in the order they are taken (the activity log comes after the pages whose reads it lists). */
export const SHOTS: Shot[] = [
  { file: 'home.png', title: 'Your projects', path: '/', screen: 'laptop' },
  { file: 'project.png', title: 'A project: its environments, the teams you can open, the audit pages', path: '/p/Acme', screen: 'laptop' },
  { file: 'team.png', title: 'A team in an environment: its collections and workflows', path: '/p/Acme/e/production/t/Support', screen: 'laptop' },
  { file: 'collection.png', title: 'A collection’s records', path: '/p/Acme/e/production/t/Support/c/orders', screen: 'laptop' },
  { file: 'record.png', title: 'A record: its data, Run buttons, runs, notes and history', path: RECORD, screen: 'laptop' },
  { file: 'run.png', title: 'A run: its steps and what each did', path: '/runs/{runId}', screen: 'laptop' },
  { file: 'workflow.png', title: 'A workflow’s trigger settings and completion callbacks', path: '/p/Acme/e/production/t/Support/w/Refund%20order', screen: 'laptop' },
  { file: 'builder.png', title: 'A workflow’s steps in the visual builder', path: '/p/Acme/e/production/t/Support/w/Refund%20order', screen: 'laptop', click: '#tab-builder' },
  { file: 'health.png', title: 'A workflow’s health: its runs by status over the last day, failure rate, durations, slowest steps', path: '/p/Acme/e/production/t/Support/w/Refund%20order/health', screen: 'laptop' },
  { file: 'activity.png', title: 'The activity log, reads included', path: '/p/Acme/e/production/activity', screen: 'laptop' },
  { file: 'account.png', title: 'Your account: API tokens', path: '/account', screen: 'laptop' },
  { file: 'phone-record.png', title: 'A record on a phone', path: RECORD, screen: 'phone' },
  { file: 'phone-run.png', title: 'A run on a phone', path: '/runs/{runId}', screen: 'phone' },
]

async function until<T>(what: string, read: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await read().catch(() => undefined)
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await Bun.sleep(200)
  }
}

async function main() {
  if (!browserAvailable) throw new Error(`Chromium not found at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`)
  const work = mkdtempSync(join(tmpdir(), 'trellis-screenshots-'))
  const data = join(work, 'data')
  const serve = await startServe({ dataDir: data, cwd: work, env: { TRELLIS_LOG_LEVEL: 'warn' } })
  const base = serve.url
  const browser = await launchBrowser()
  try {
    copyFileSync(join(root, 'examples/acme.yaml'), join(work, 'acme.yaml'))
    const applied = await runCli(['apply', '-f', 'acme.yaml', '--data', data], { cwd: work })
    if (applied.code !== 0) throw new Error(`trellis apply: exit ${applied.code}\n${applied.stderr}`)

    const problems: string[] = []
    const context = await browser.newContext({ baseURL: base, viewport: SCREENS.laptop })
    const page = await context.newPage()
    watchPage(page, problems)
    const api = context.request
    const headers = { origin: base }
    const login = await api.post('/auth/login', { data: ALICE, headers })
    if (!login.ok()) throw new Error(`sign-in as alice: ${login.status()} ${await login.text()}`)
    const started = await api.post('/v1/project/Acme/environment/production/workflow-runs', {
      data: { workflowName: 'Refund order', teamName: 'Support', recordId: 'ord_1001' },
      headers,
    })
    if (started.status() !== 202) throw new Error(`starting a run: ${started.status()} ${await started.text()}`)
    const { runId } = (await started.json()) as { runId: string }
    await until(
      'the run to succeed',
      async () => (((await (await api.get(`/v1/workflow-runs/${runId}`)).json()) as { status: string }).status === 'succeeded' ? true : undefined),
      30_000,
    )

    mkdirSync(out, { recursive: true })
    for (const old of readdirSync(out)) if (old.endsWith('.png')) unlinkSync(join(out, old))
    for (const shot of SHOTS) {
      await page.setViewportSize(SCREENS[shot.screen])
      const path = shot.path.replace('{runId}', runId)
      const response = await page.goto(path, { waitUntil: 'networkidle' })
      if (response?.status() !== 200) throw new Error(`${path}: ${response?.status()}`)
      if (shot.click) await page.click(shot.click)
      await page.screenshot({ path: join(out, shot.file) })
      console.log(`${shot.file}  ${path}`)
    }
    if (problems.length > 0) throw new Error(`the pages had problems:\n${problems.join('\n')}`)
    writeFileSync(join(out, 'README.md'), gallery())
    console.log(`${SHOTS.length} screenshots in docs/screenshots/`)
  } finally {
    await browser.close()
    await serve.stop()
    rmSync(work, { recursive: true, force: true })
  }
}

/** docs/screenshots/README.md: every screenshot with its page (written by this script: run it again, do not edit). */
function gallery(): string {
  const size = (screen: Shot['screen']) => `${SCREENS[screen].width}×${SCREENS[screen].height}`
  return [
    '# What the console looks like',
    '',
    '[← README](../../README.md) · [the web console](../console.md)',
    '',
    'Written by `npm run screenshots` (`scripts/screenshots.ts`): a real `trellis serve` with `examples/acme.yaml`',
    'applied, signed in as alice (an admin of Acme), after one "Refund order" run. Run it again after the console changes.',
    '',
    ...SHOTS.flatMap((shot) => [`## ${shot.title}`, '', `\`${shot.path}\` at ${size(shot.screen)}`, '', `![${shot.title}](${shot.file})`, '']),
  ].join('\n')
}

await main()
