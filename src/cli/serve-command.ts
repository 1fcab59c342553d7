/**
 * `trellis serve`'s declaration: what its help lists and how its flags parse. The server itself (./serve.ts: the app,
 * the executor, the HTTP layer) is imported only when the command runs, so every other command and every `--help`
 * starts without loading it.
 */
import { type Command, SETTING_FLAGS } from './command.ts'

export const serveCommand: Command = {
  summary: 'migrate, then serve the API, console and executor',
  usage: 'trellis serve [--host HOST] [--port PORT] [--base-url URL] [--data DIR | --database-url URL] [--oidc-issuer URL --oidc-client-id ID [--oidc-client-secret-file FILE] [--oidc-auto-create]] [--audit-checkpoint-every N] [--audit-checkpoint-seconds S] [--audit-witness-dir DIR] [--audit-witness-url URL]',
  flags: {
    host: SETTING_FLAGS.host,
    port: SETTING_FLAGS.port,
    'base-url': SETTING_FLAGS['base-url'],
    'oidc-issuer': SETTING_FLAGS['oidc-issuer'],
    'oidc-client-id': SETTING_FLAGS['oidc-client-id'],
    'oidc-client-secret-file': SETTING_FLAGS['oidc-client-secret-file'],
    'oidc-auto-create': SETTING_FLAGS['oidc-auto-create'],
    'audit-checkpoint-every': SETTING_FLAGS['audit-checkpoint-every'],
    'audit-checkpoint-seconds': SETTING_FLAGS['audit-checkpoint-seconds'],
    'audit-witness-dir': SETTING_FLAGS['audit-witness-dir'],
    'audit-witness-url': SETTING_FLAGS['audit-witness-url'],
  },
  async run(argv, io) {
    const { serve } = await import('./serve.ts')
    return serve(argv, io, this.flags)
  },
}
