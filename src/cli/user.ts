import { writeTransaction } from '../db/write.ts'
import { systemClock } from '../lib/clock.ts'
import { setUserDeactivated } from '../modules/members/service.ts'
import {
  checkNewUser,
  findUserByEmail,
  hashPassword,
  insertUser,
  passwordProblem,
  setUserPasswordHash,
  UserInputError,
} from '../modules/users/service.ts'
import { booleanFlag, type Command, CommandError, configFrom, openMigrated, parseFlags, readSecretLine, required, stringFlag, UsageError } from './command.ts'

const USAGE = [
  'trellis user create --email E --username U [--password-stdin]',
  '       trellis user disable|enable --email E',
  '       trellis user set-password --email E --password-stdin',
].join('\n')

export const userCommand: Command = {
  summary: 'create users, disable or enable them, set passwords',
  usage: USAGE,
  flags: {
    email: stringFlag('EMAIL', "the user's email (required)"),
    username: stringFlag('NAME', 'create: the user name (required)'),
    'password-stdin': booleanFlag('read the password from the first line of standard input'),
  },
  async run(argv, io) {
    const [sub, ...rest] = argv
    const parsed = parseFlags(rest, this.flags)
    if (!sub || !['create', 'disable', 'enable', 'set-password'].includes(sub)) {
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
    const passwordHash = password === undefined ? undefined : hashPassword(password)
    const store = openMigrated(configFrom(parsed))
    try {
      const message = writeTransaction(store, (tx) => {
        if (sub === 'create') {
          const username = required(parsed, 'username')
          try {
            checkNewUser({ email, username })
          } catch (error) {
            if (error instanceof UserInputError) throw new CommandError(error.message)
            throw error
          }
          if (findUserByEmail(tx, email)) throw new CommandError(`a user with email ${email} already exists`)
          const user = insertUser(tx, systemClock, { email, username, passwordHash })
          return `created user ${user.email} (id ${user.id})`
        }
        const user = findUserByEmail(tx, email)
        if (!user) throw new CommandError(`unknown user ${email}`)
        if (sub === 'set-password') {
          setUserPasswordHash(tx, systemClock, user.id, passwordHash!)
          return `password set for ${user.email}`
        }
        const disable = sub === 'disable'
        if (!setUserDeactivated(tx, systemClock, user.id, disable, null)) return `${user.email} is already ${disable ? 'disabled' : 'enabled'}`
        return `${disable ? 'disabled' : 'enabled'} ${user.email}`
      })
      io.out(message)
      return 0
    } finally {
      store.close()
    }
  },
}
