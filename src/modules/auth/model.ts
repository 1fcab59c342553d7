/** Console sign-in and the caller's identity. */
import { t } from 'elysia'
import { IsoDateTime } from '../../http/schemas.ts'
import { UserObject } from '../directory/model.ts'

export const LoginBody = t.Object({ email: t.String({ maxLength: 320 }), password: t.String({ maxLength: 1024 }) })

export const AcceptInvitationBody = t.Object({ token: t.String({ minLength: 1, maxLength: 100 }), password: t.String({ maxLength: 1024 }) })

export const Session = t.Object({ user: UserObject, expiresAt: IsoDateTime })

export const Account = t.Object({ user: UserObject, viaSso: t.Boolean({ description: 'Signed in through SSO' }) })
