/** Console sign-in and the caller's identity. */
import { t } from 'elysia'
import { IsoDateTime } from '../../http/schemas.ts'
import { UserObject } from '../directory/model.ts'

export const LoginBody = t.Object({ email: t.String({ maxLength: 320 }), password: t.String({ maxLength: 1024 }) })

export const AcceptInvitationBody = t.Object({ token: t.String({ minLength: 1, maxLength: 100 }), password: t.String({ maxLength: 1024 }) })

export const Session = t.Object({ user: UserObject, expiresAt: IsoDateTime })

export const Account = t.Object({
  user: UserObject,
  viaSso: t.Boolean({ description: 'Signed in through SSO' }),
  taskMail: t.Boolean({ description: 'Whether this person is sent task e-mail (opened, reminder, escalation, outcome); their own choice, on by default' }),
  mailEnabled: t.Boolean({ description: 'Whether this instance sends e-mail at all (an SMTP server is configured); without it the inbox is the only channel' }),
})

export const UpdateAccountBody = t.Object({ taskMail: t.Boolean({ description: 'Turn task e-mail to yourself on or off' }) })
