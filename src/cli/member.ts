import { systemClock } from '../lib/clock.ts'
import { PERMISSION_LEVELS, type PermissionLevel, removeProjectMember, setProjectMember } from '../modules/members/service.ts'
import { type Command, configFrom, inWriteTransaction, parseFlags, required, requireProjectByName, requireUserByEmail, stringFlag, UsageError } from './command.ts'

export const memberCommand: Command = {
  summary: "set a user's permission level in a project, or remove them from it",
  usage: `trellis member set --project P --user EMAIL --role ${PERMISSION_LEVELS.join('|')}\n       trellis member remove --project P --user EMAIL`,
  flags: {
    project: stringFlag('P', 'the project (required)'),
    user: stringFlag('EMAIL', 'the user (required)'),
    role: stringFlag('ROLE', `set: one of ${PERMISSION_LEVELS.join(', ')}`),
  },
  async run(argv, io) {
    const [sub, ...rest] = argv
    const parsed = parseFlags(rest, this.flags)
    if (sub !== 'set' && sub !== 'remove') throw new UsageError(sub ? `unknown subcommand "${sub}"` : 'a subcommand is required')
    const projectName = required(parsed, 'project')
    const email = required(parsed, 'user')
    if (sub === 'remove') return removeFromCli(parsed, projectName, email, io)
    const role = required(parsed, 'role')
    if (!PERMISSION_LEVELS.includes(role as PermissionLevel)) {
      throw new UsageError(`--role must be one of ${PERMISSION_LEVELS.join(', ')}`)
    }
    const outcome = await inWriteTransaction(configFrom(parsed), function* () {
      const project = yield* requireProjectByName(projectName)
      const user = yield* requireUserByEmail(email)
      return yield* setProjectMember(systemClock, { projectId: project.id, userId: user.id, role: role as PermissionLevel, actorId: null })
    })
    io.out(outcome === 'unchanged' ? `${email} is already ${role} in ${projectName}` : `${email} is now ${role} in ${projectName}`)
    return 0
  },
}

async function removeFromCli(parsed: ReturnType<typeof parseFlags>, projectName: string, email: string, io: Parameters<Command['run']>[1]) {
  const removed = await inWriteTransaction(configFrom(parsed), function* () {
    const project = yield* requireProjectByName(projectName)
    const user = yield* requireUserByEmail(email)
    return yield* removeProjectMember(systemClock, { projectId: project.id, userId: user.id, actorId: null })
  })
  io.out(removed ? `removed ${email} from ${projectName}` : `${email} is not a member of ${projectName}`)
  return 0
}
