import { systemClock } from '../lib/clock.ts'
import { loadInstanceSecret } from '../lib/secret.ts'
import { requireProject } from '../modules/directory/projects.ts'
import { changeWebhook, type WebhookChange } from '../modules/webhooks/service.ts'
import { requireWorkflow, webhookSettings } from '../modules/workflows/service.ts'
import { HttpError } from '../lib/errors.ts'
import { type Command, CommandError, configFrom, inWriteTransaction, parseFlags, PRINTED_BASE_URL_FLAG, required, stringFlag, UsageError } from './command.ts'

const TARGET = '--project P --environment E --team T --workflow W'
const USAGE = [
  `trellis webhook show|enable|disable|regenerate ${TARGET}`,
  `       trellis webhook rate ${TARGET} --per-minute N|default`,
  '  show and regenerate print only the URL on stdout (nothing when the webhook is disabled)',
].join('\n')

const SUBCOMMANDS = ['show', 'enable', 'disable', 'regenerate', 'rate'] as const

export const webhookCommand: Command = {
  summary: "show a workflow's webhook URL; enable, disable, regenerate it or set its rate",
  usage: USAGE,
  flags: {
    project: stringFlag('P', 'the project (required)'),
    environment: stringFlag('E', 'the environment (required)'),
    team: stringFlag('T', 'the team (required)'),
    workflow: stringFlag('W', 'the workflow (required)'),
    'per-minute': stringFlag('N|default', 'rate: this webhook\'s own limit per minute (1 to 100000), or "default" for TRELLIS_WEBHOOK_RATE_PER_MIN'),
    'base-url': PRINTED_BASE_URL_FLAG,
  },
  async run(argv, io) {
    const [sub, ...rest] = argv
    const parsed = parseFlags(rest, this.flags)
    if (!sub || !SUBCOMMANDS.includes(sub as (typeof SUBCOMMANDS)[number])) {
      throw new UsageError(sub ? `unknown subcommand "${sub}"` : 'a subcommand is required')
    }
    const names = {
      project: required(parsed, 'project'),
      environment: required(parsed, 'environment'),
      team: required(parsed, 'team'),
      workflow: required(parsed, 'workflow'),
    }
    const change = changeFor(sub, parsed.values['per-minute'])
    const config = configFrom(parsed, { servedBaseUrl: true })
    try {
      const target = await inWriteTransaction(config, function* () {
        const project = yield* requireProject(names.project)
        const target = yield* requireWorkflow(project.id, names.environment, names.team, names.workflow)
        return change ? (yield* changeWebhook(systemClock, target, change, null)) : target
      })
      const settings = webhookSettings(target, loadInstanceSecret(config.dataDir, config.secretFromEnv), config.baseUrl, config.webhookRatePerMinute)
      if (sub === 'show' || sub === 'regenerate') {
        if (settings.url) io.out(settings.url)
        else io.err(`the webhook of ${names.workflow} is disabled (trellis webhook enable … to restore its URL)`)
      } else {
        io.out(`${names.workflow}: webhook ${settings.enabled ? 'enabled' : 'disabled'}, ${settings.effectiveRatePerMinute}/min${settings.ratePerMinute === null ? ' (default)' : ''}`)
      }
      return 0
    } catch (error) {
      if (error instanceof HttpError) throw new CommandError(error.message)
      throw error
    }
  },
}

function changeFor(sub: string, perMinute: string | boolean | undefined): WebhookChange | null {
  if (sub === 'enable' || sub === 'disable') return { enabled: sub === 'enable' }
  if (sub === 'regenerate') return { regenerate: true }
  if (sub === 'rate') {
    if (perMinute === 'default') return { ratePerMinute: null }
    if (typeof perMinute !== 'string' || !/^\d+$/.test(perMinute) || Number(perMinute) < 1 || Number(perMinute) > 100_000) {
      throw new UsageError('--per-minute must be a whole number from 1 to 100000, or "default"')
    }
    return { ratePerMinute: Number(perMinute) }
  }
  return null
}
