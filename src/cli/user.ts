import { systemClock } from '../lib/clock.ts'
import { linkSsoIdentity, unlinkSsoIdentity } from '../modules/auth/oidc-service.ts'
import { setUserDeactivated } from '../modules/members/service.ts'
import { createUser, hashPasswordSync, passwordProblem, setInstanceAdmin, setUserPasswordHash } from '../modules/users/service.ts'
import { booleanFlag, type Command, CommandError, configFrom, inWriteTransaction, parseFlags, readSecretLine, required, requireUserByEmail, stringFlag, UsageError } from './command.ts'

const USAGE = [
  'trellis user create --email E --username U [--password-stdin] [--instance-admin]',
  '       trellis user instance-admin --email E [--revoke]',
  '       trellis user disable|enable --email E',
  '       trellis user set-password --email E --password-stdin',
  '       trellis user link-sso --email E --issuer URL --subject SUB',
  '       trellis user unlink-sso --email E --issuer URL',
].join('\n')

export const userCommand: Command = {
  summary: 'create users, disable or enable them, set passwords, name instance administrators, link SSO accounts',
  usage: USAGE,
  flags: {
    email: stringFlag('EMAIL', "the user's email (required)"),
    username: stringFlag('NAME', 'create: the user name (required)'),
    'password-stdin': booleanFlag('read the password from the first line of standard input'),
    'instance-admin': booleanFlag('create: the user is an instance administrator (console instance pages)'),
    revoke: booleanFlag('instance-admin: take instance administration away (never from the last one)'),
    issuer: stringFlag('URL', "link-sso, unlink-sso: the identity provider's issuer, as its ID tokens' iss claim says it"),
    subject: stringFlag('SUB', "link-sso: the account's sub claim (the \"link your account\" page shows it)"),
  },
  async run(argv, io) {
    const [sub, ...rest] = argv
    const parsed = parseFlags(rest, this.flags)
    if (!sub || !['create', 'disable', 'enable', 'set-password', 'instance-admin', 'link-sso', 'unlink-sso'].includes(sub)) {
      throw new UsageError(sub ? `unknown subcommand "${sub}"` : 'a subcommand is required')
    }
    const email = required(parsed, 'email')
    const wantsPassword = parsed.values['password-stdin'] === true
    if (sub === 'set-password' && !wantsPassword) throw new UsageError('--password-stdin is required')
    const password = wantsPassword ? await readSecretLine(io, 'password') : undefined
    if (password !== undefined) {
      const problem = passwordProblem(password)
      if (problem) throw new CommandError(`password ${problem}`)
    }
    const passwordHash = password === undefined ? undefined : hashPasswordSync(password)
    const message = await inWriteTransaction(configFrom(parsed), function* () {
      if (sub === 'create') {
        const username = required(parsed, 'username')
        const isInstanceAdmin = parsed.values['instance-admin'] === true
        const user = yield* createUser(systemClock, { email, username, passwordHash, isInstanceAdmin, actorId: null })
        return `created ${isInstanceAdmin ? 'instance administrator' : 'user'} ${user.email} (id ${user.id})`
      }
      const user = yield* requireUserByEmail(email)
      if (sub === 'instance-admin') {
        const grant = parsed.values.revoke !== true
        const changed = yield* setInstanceAdmin(systemClock, user, grant, null)
        const state = grant ? 'an instance administrator' : 'not an instance administrator'
        return changed ? `${user.email} is now ${state}` : `${user.email} is already ${state}`
      }
      if (sub === 'link-sso') {
        const account = { issuer: required(parsed, 'issuer'), subject: required(parsed, 'subject') }
        const linked = yield* linkSsoIdentity(systemClock, user, account, { actorId: null, initiator: 'administrator', how: 'by an operator (CLI)' })
        return `${user.email} ${linked ? 'is now' : 'was already'} linked to the SSO account ${account.subject} of ${account.issuer}`
      }
      if (sub === 'unlink-sso') {
        const issuer = required(parsed, 'issuer')
        const subject = yield* unlinkSsoIdentity(systemClock, user, issuer)
        return subject === null ? `${user.email} has no SSO account of ${issuer}` : `${user.email} unlinked from the SSO account ${subject} of ${issuer}`
      }
      if (sub === 'set-password') {
        yield* setUserPasswordHash(systemClock, user.id, passwordHash!)
        return `password set for ${user.email}`
      }
      const disable = sub === 'disable'
      if (!(yield* setUserDeactivated(systemClock, user.id, disable, null))) return `${user.email} is already ${disable ? 'disabled' : 'enabled'}`
      return `${disable ? 'disabled' : 'enabled'} ${user.email}`
    })
    io.out(message)
    return 0
  },
}
