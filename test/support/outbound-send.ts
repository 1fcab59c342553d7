/**
 * Sends one request through the OutboundClient in its own process, so the test can give it a CA to trust
 * (NODE_EXTRA_CA_CERTS is read when the process starts). Usage: `bun outbound-send.ts URL ADDRESS ALLOW`, where
 * the URL's host resolves to ADDRESS. Prints the answer, or the error's name and code, as JSON.
 */
import { OutboundClient } from '../../src/lib/outbound/client.ts'
import { parseAllowList } from '../../src/lib/outbound/policy.ts'

const [url, address, allow] = process.argv.slice(2) as [string, string, string]
const client = new OutboundClient({ allow: parseAllowList(allow), resolve: async () => [address] })
try {
  const answer = await client.send(new URL(url), { method: 'GET', headers: {}, signal: AbortSignal.timeout(5_000), maxBodyChars: 200 })
  console.log(JSON.stringify({ answer }))
} catch (error) {
  console.log(JSON.stringify({ error: (error as Error).name, code: (error as { code?: string }).code ?? null }))
}
