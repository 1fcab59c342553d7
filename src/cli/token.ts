import { systemClock } from '../lib/clock.ts'
import { parseIsoDateTime } from '../lib/time.ts'
import {
  cliTokenView,
  createToken,
  findToken,
  listTokens,
  PRESETS,
  resolveExpiry,
  resolveScopes,
  revokeToken,
  SCOPES,
  TokenInputError,
} from '../modules/tokens/service.ts'
import { booleanFlag, type Command, CommandError, configFrom, inReadTransaction, inWriteTransaction, parseFlags, required, requireProjectByName, requireUserByEmail, stringFlag, UsageError } from './command.ts'
import { isMemberOf } from '../modules/directory/projects.ts'

const USAGE = [
  'trellis token create --user EMAIL --project NAME --name NAME [--scopes a,b | --preset read-only|read-write] [--expires-in 30d | --expires-at ISO]',
  '       trellis token list [--project NAME] [--user EMAIL] [--json]',
  '       trellis token revoke ID',
].join('\n')

/** `30d`, `12h`, `90` (days) → days; tokens expire in whole days or hours. */
function parseExpiresIn(text: string): number {
  const match = /^(\d+)\s*([dh]?)$/i.exec(text.trim())
  if (!match) throw new UsageError(`--expires-in must look like 30d or 12h, got "${text}"`)
  const amount = Number(match[1])
  return match[2]?.toLowerCase() === 'h' ? amount / 24 : amount
}

export const tokenCommand: Command = {
  summary: 'create, list and revoke application tokens',
  usage: USAGE,
  flags: {
    user: stringFlag('EMAIL', "create: the token's user; list: only this user's tokens"),
    project: stringFlag('NAME', "create: the token's project; list: only this project's tokens"),
    name: stringFlag('NAME', 'create: a name to recognise the token by'),
    scopes: stringFlag('a,b', `create: its scopes, among ${SCOPES.join(', ')}`),
    preset: stringFlag('PRESET', `create: instead of --scopes, ${Object.keys(PRESETS).join(' or ')} (default read-only)`),
    'expires-in': stringFlag('30d|12h', 'create: expires after this many days (d) or hours (h)'),
    'expires-at': stringFlag('ISO', 'create: expires at this ISO 8601 date-time'),
    json: booleanFlag('list: print JSON'),
  },
  async run(argv, io) {
    const [sub, ...rest] = argv
    const parsed = parseFlags(rest, this.flags, sub === 'revoke' ? 1 : 0)
    if (sub === 'create') return createFromCli(parsed, io)
    if (sub === 'list') return listFromCli(parsed, io)
    if (sub === 'revoke') return revokeFromCli(parsed, io)
    throw new UsageError(sub ? `unknown subcommand "${sub}"` : 'a subcommand is required')
  },
}

async function createFromCli(parsed: ReturnType<typeof parseFlags>, io: Parameters<Command['run']>[1]) {
  const email = required(parsed, 'user')
  const projectName = required(parsed, 'project')
  const name = required(parsed, 'name').trim()
  const v = parsed.values
  const expiresAtText = v['expires-at'] as string | undefined
  const expiresAt = expiresAtText === undefined ? undefined : parseIsoDateTime(expiresAtText)
  if (expiresAt === null) throw new UsageError(`--expires-at is not an ISO 8601 date-time: "${expiresAtText}"`)
  const expiresInDays = v['expires-in'] === undefined ? undefined : parseExpiresIn(v['expires-in'] as string)
  const scopes = typeof v.scopes === 'string' ? v.scopes.split(',').map((s) => s.trim()).filter(Boolean) : undefined
  const config = configFrom(parsed)
  const value = await inWriteTransaction(config, function* () {
    const now = systemClock.now()
    let resolved
    let expiry
    try {
      resolved = resolveScopes(scopes, v.preset as string | undefined)
      // Hours are allowed on the CLI: convert to an absolute time first.
      expiry =
        expiresInDays !== undefined && !Number.isInteger(expiresInDays)
          ? resolveExpiry(now, now + Math.round(expiresInDays * 86_400_000), undefined)
          : resolveExpiry(now, expiresAt, expiresInDays)
    } catch (error) {
      if (error instanceof TokenInputError) throw new UsageError(error.message)
      throw error
    }
    const user = yield* requireUserByEmail(email)
    if (user.disabledAt !== null) throw new CommandError(`user ${email} is disabled`)
    const project = yield* requireProjectByName(projectName)
    if (!(yield* isMemberOf(user.id, project.id))) throw new CommandError(`${email} is not a member of ${projectName}`)
    if (project.sso) throw new CommandError(`${projectName} uses SSO: its tokens must be generated while logged in with SSO`)
    return (yield* createToken(systemClock, {
      name,
      userId: user.id,
      projectId: project.id,
      scopes: resolved,
      expiresAt: expiry,
      createdWithSso: false,
      actorId: null,
      maxLiveTokens: config.liveTokensPerUser,
    })).value
  })
  io.out(value)
  return 0
}

async function listFromCli(parsed: ReturnType<typeof parseFlags>, io: Parameters<Command['run']>[1]) {
  const rows = await inReadTransaction(configFrom(parsed), function* () {
    const filter: { projectId?: number; userId?: number } = {}
    if (typeof parsed.values.project === 'string') filter.projectId = (yield* requireProjectByName(parsed.values.project)).id
    if (typeof parsed.values.user === 'string') filter.userId = (yield* requireUserByEmail(parsed.values.user)).id
    return (yield* listTokens({ ...filter, includeRevoked: true })).map(cliTokenView)
  })
  if (parsed.values.json) {
    io.out(JSON.stringify(rows, null, 2))
  } else {
    for (const t of rows) {
      const state = t.revokedAt ? `revoked ${t.revokedAt}` : t.expiresAt ? `expires ${t.expiresAt}` : 'no expiry'
      io.out(`${t.id}\t${t.prefix}…\t${t.name}\t${t.user}\t${t.project}\t${t.scopes.join(',')}\tlast used ${t.lastUsedAt ?? 'never'}\t${state}`)
    }
  }
  return 0
}

async function revokeFromCli(parsed: ReturnType<typeof parseFlags>, io: Parameters<Command['run']>[1]) {
  const idText = parsed.positionals[0]
  if (!idText || !/^\d+$/.test(idText)) throw new UsageError('revoke needs a token ID (see `trellis token list`)')
  const revoked = await inWriteTransaction(configFrom(parsed), function* () {
    const token = yield* findToken(Number(idText))
    if (!token) throw new CommandError(`unknown token ${idText}`)
    return yield* revokeToken(systemClock, token, null)
  })
  io.out(revoked ? `revoked token ${idText}` : `token ${idText} was already revoked`)
  return 0
}
