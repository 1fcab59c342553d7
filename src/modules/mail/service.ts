/**
 * E-mail (docs/mail.md): what other services call to send a message, and each person's task-mail choice. Queuing
 * only inserts into the outbox inside the caller's transaction (src/db/mail.ts), so a message exists if and only if
 * what caused it committed, and no request ever waits for an SMTP server: the sender (src/executor/mail-delivery.ts)
 * sends it afterwards, retrying, with the `Message-ID` made here on every attempt. Without TRELLIS_SMTP_URL nothing is
 * queued (`MailSettings` is null) and the console's inbox is the only channel.
 */
import { randomUUIDv7 } from 'bun'
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import type { Config } from '../../config.ts'
import { findTaskMailPreference, findTaskMailRecipients, insertMail, listFailedMail, setTaskMailPreference } from '../../db/mail.ts'
import type { Op } from '../../db/op.ts'
import { purposeKey } from '../../lib/secret.ts'

/** What queuing needs to know, built once per app from the configuration (`mailSettingsOf`); null: no mail is sent. */
export interface MailSettings {
  /** The instance's public URL (TRELLIS_BASE_URL): every link in a mail starts with it. */
  baseUrl: string
  /** The from-address's domain: `Message-ID`s are `<uuid@domain>`. */
  domain: string
  /** Seals the bodies that hold a secret (an invitation link): derived from the instance secret, never stored. */
  sealKey: Uint8Array
}

/** The settings queuing needs, or null when no SMTP server is configured. */
export function mailSettingsOf(config: Pick<Config, 'mail' | 'baseUrl'>, secret: Buffer): MailSettings | null {
  if (config.mail === null) return null
  return { baseUrl: config.baseUrl, domain: config.mail.domain, sealKey: purposeKey(secret, 'mail outbox bodies') }
}

/** What a task mail is about: the task was opened for its assignees, is due soon, was escalated, or closed (to the run's user). */
export const TASK_MAIL_KINDS = ['task.opened', 'task.reminder', 'task.escalated', 'task.closed'] as const
export type TaskMailKind = (typeof TASK_MAIL_KINDS)[number]
export type MailKind = 'invitation' | TaskMailKind

/** One message to one recipient. */
export interface OutgoingMail {
  kind: MailKind
  to: string
  subject: string
  text: string
  html?: string
  /** The body holds a secret (an invitation's one-time link): stored sealed, readable only with the instance secret. */
  secret?: boolean
}

/** A header's text on one line, at most 200 characters (a subject built from data must not add headers). */
const oneLine = (text: string) => text.replace(/[\r\n\t]+/g, ' ').trim().slice(0, 200)

/**
 * Queues one message in the caller's transaction, due at once; its `Message-ID` (the same on every attempt), or null
 * when no mail is sent (`mail` null: no SMTP server configured).
 */
export function* queueMail(mail: MailSettings | null, now: number, message: OutgoingMail): Op<string | null> {
  if (mail === null) return null
  const id = randomUUIDv7()
  const messageId = `<${id}@${mail.domain}>`
  const seal = (body: string) => (message.secret ? sealMailBody(mail.sealKey, body) : body)
  yield* insertMail({
    id,
    messageId,
    kind: message.kind,
    recipient: message.to,
    subject: oneLine(message.subject),
    textBody: seal(message.text),
    htmlBody: message.html === undefined ? null : seal(message.html),
    sealed: message.secret === true,
    createdAt: now,
  })
  return messageId
}

/** The console's page of a task: what a task mail links to (no token: the reader signs in). */
export function taskPageUrl(baseUrl: string, taskId: string): string {
  return new URL(`/tasks/${encodeURIComponent(taskId)}`, baseUrl).toString()
}

/**
 * Queues a task mail, in the caller's transaction, to each of `userIds` who wants it: active, task mail not turned
 * off in Account. The text is followed by the task's link and how to stop these mails. Answers the addresses queued
 * (none when no SMTP server is configured).
 */
export function* queueTaskMail(
  mail: MailSettings | null,
  now: number,
  input: { kind: TaskMailKind; userIds: readonly number[]; taskId: string; subject: string; text: string },
): Op<string[]> {
  if (mail === null || input.userIds.length === 0) return []
  const recipients = yield* findTaskMailRecipients([...new Set(input.userIds)])
  const text = `${input.text.trimEnd()}\n\nOpen the task: ${taskPageUrl(mail.baseUrl, input.taskId)}\n\n--\nYou get this because a Trellis task involves you. Turn task e-mail off in Account: ${new URL('/account', mail.baseUrl)}\n`
  for (const recipient of recipients) yield* queueMail(mail, now, { kind: input.kind, to: recipient.email, subject: input.subject, text })
  return recipients.map((recipient) => recipient.email)
}

/** Whether the user wants task e-mail (true unless they turned it off in Account); says nothing of SMTP being configured. */
export function wantsTaskMail(userId: number): Op<boolean> {
  return findTaskMailPreference(userId)
}

/** The user's own choice of task e-mail. */
export function setTaskMail(userId: number, on: boolean, now: number): Op<void> {
  return setTaskMailPreference(userId, on, now)
}

/** An invitation's mail: the one-time link, sealed in the outbox; its Message-ID, or null when no mail is sent. */
export function queueInvitationMail(mail: MailSettings | null, now: number, invitation: { to: string; url: string; expiresAt: string }): Op<string | null> {
  return queueMail(mail, now, {
    kind: 'invitation',
    to: invitation.to,
    subject: 'You are invited to Trellis',
    text: `An administrator added you to Trellis.\n\nChoose your password here (the link works once, until ${invitation.expiresAt}):\n${invitation.url}\n\nIf you did not expect this, ignore this mail.\n`,
    secret: true,
  })
}

/** The last messages given up on (at most `limit`), newest first, for the instance administrators. */
export function recentMailFailures(limit = 20) {
  return listFailedMail(limit)
}

const SEALED = 'sealed:v1:'

/** AES-256-GCM under the outbox key: `sealed:v1:<iv>.<ciphertext>.<tag>`, base64url. */
function sealMailBody(key: Uint8Array, body: string): string {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', key, iv)
  const sealed = Buffer.concat([cipher.update(body, 'utf8'), cipher.final()])
  return `${SEALED}${iv.toString('base64url')}.${sealed.toString('base64url')}.${cipher.getAuthTag().toString('base64url')}`
}

/** A body as sent: a sealed one opened with the outbox key (a body sealed under another instance secret throws). */
export function openMailBody(key: Uint8Array, body: string, sealed: boolean): string {
  if (!sealed) return body
  if (!body.startsWith(SEALED)) throw new Error('a sealed mail body has no seal')
  const [iv, data, tag] = body.slice(SEALED.length).split('.')
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv ?? '', 'base64url'))
  decipher.setAuthTag(Buffer.from(tag ?? '', 'base64url'))
  return Buffer.concat([decipher.update(Buffer.from(data ?? '', 'base64url')), decipher.final()]).toString('utf8')
}
