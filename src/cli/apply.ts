import { readFileSync } from 'node:fs'
import { systemClock } from '../lib/clock.ts'
import { loadInstanceSecret } from '../lib/secret.ts'
import { read } from '../db/read.ts'
import { effectiveAllowList } from '../modules/instance/outbound-allow.ts'
import { ApplyError, type ApplyReport, applyDocument, parseApplyText } from '../modules/apply/service.ts'
import { booleanFlag, type Command, CommandError, configFrom, parseFlags, PRINTED_BASE_URL_FLAG, required, stringFlag, withStore } from './command.ts'

export const applyCommand: Command = {
  summary: 'create or update users, projects, workflows… from a YAML or JSON file (idempotent)',
  usage: 'trellis apply -f FILE [--as EMAIL] [--json] [--base-url URL] [--data DIR | --database-url URL]',
  flags: {
    file: stringFlag('FILE', 'the apply file, YAML or JSON; "-" reads standard input (required)', 'f'),
    as: stringFlag('EMAIL', "who record changes are logged as (default: each project's first admin)"),
    json: booleanFlag('print the report as JSON (webhook URLs and new callbacks\' secrets included)'),
    'base-url': PRINTED_BASE_URL_FLAG,
  },
  async run(argv, io) {
    const parsed = parseFlags(argv, this.flags)
    const path = required(parsed, 'file')
    const config = configFrom(parsed, { servedBaseUrl: true })
    let text: string
    try {
      text = path === '-' ? await io.readStdin() : readFileSync(path, 'utf8')
    } catch (error) {
      throw new CommandError(`cannot read ${path}: ${(error as Error).message}`)
    }
    try {
      const report = await withStore(config, async (store) =>
        applyDocument(parseApplyText(text), {
          store,
          clock: systemClock,
          secret: loadInstanceSecret(config.dataDir, config.secretFromEnv),
          baseUrl: config.baseUrl,
          actorEmail: parsed.values.as as string | undefined,
          // Callback URLs are checked as the API checks them: against the list in effect (the console's, or the environment's).
          httpAllow: await read(store, effectiveAllowList(config)),
        }),
      )
      io.out(parsed.values.json ? JSON.stringify(report, null, 2) : humanReport(report))
      return 0
    } catch (error) {
      if (error instanceof ApplyError) {
        throw new CommandError(`${path} was not applied; nothing changed:\n${error.message}`)
      }
      throw error
    }
  },
}

function humanReport(report: ApplyReport): string {
  const lines = report.changes.map((c) => `${c.action.padEnd(9)} ${c.kind} ${c.name}`)
  for (const item of report.notInFile) lines.push(`not in file ${item.kind} ${item.name} (kept)`)
  for (const w of report.workflows) {
    if (w.webhook.url) lines.push(`webhook   ${w.project}/${w.environment}/${w.team}/${w.name} v${w.version}: ${w.webhook.url}`)
    for (const callback of w.callbacks ?? []) {
      if (callback.secret) lines.push(`callback  ${w.project}/${w.environment}/${w.team}/${w.name} → ${callback.url}: secret ${callback.secret} (shown once)`)
    }
  }
  lines.push(`${report.created} created, ${report.updated} updated, ${report.unchanged} unchanged`)
  return lines.join('\n')
}
