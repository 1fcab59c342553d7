/**
 * The manual's links hold: every relative link and anchor of README.md and docs/*.md leads to a file of the
 * repository and, with a `#fragment`, to a heading of it — as GitHub renders them (its heading ids: the text
 * lower-cased, punctuation dropped, each space a hyphen, repeats numbered -1, -2…). A dead one is printed with its
 * file and line.
 */
import { describe, expect, test } from 'bun:test'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { repoRoot } from './helpers.ts'

/** The manual: the README, every page of docs/ and the screenshots' page (written by `npm run screenshots`). */
export const MANUAL_FILES = [
  'README.md',
  ...readdirSync(join(repoRoot, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`),
  'docs/screenshots/README.md',
]

interface Line {
  number: number
  text: string
}

/** The lines of a Markdown file outside fenced code blocks. */
function proseLines(markdown: string): Line[] {
  const lines: Line[] = []
  let fence: string | null = null
  markdown.split('\n').forEach((text, i) => {
    const marker = /^\s*(`{3,}|~{3,})/.exec(text)?.[1]
    if (marker && (fence === null || marker.startsWith(fence))) fence = fence === null ? marker.slice(0, 3) : null
    else if (fence === null) lines.push({ number: i + 1, text })
  })
  return lines
}

/** GitHub's id of a heading: its rendered text lower-cased, all but letters, digits, `_`, `-` and spaces dropped, spaces as hyphens. */
export function headingSlug(heading: string): string {
  const rendered = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // links and images: their text
    .replace(/<[^>]+>/g, '') // inline HTML tags
    .replace(/[`*]/g, '') // code spans and emphasis
  return rendered
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
    .replace(/ /g, '-')
}

/** Every anchor a file's headings give, repeats numbered as GitHub numbers them. */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  for (const { text } of proseLines(markdown)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(text)?.[1]
    if (heading === undefined) continue
    const slug = headingSlug(heading)
    const count = seen.get(slug) ?? 0
    seen.set(slug, count + 1)
    anchors.add(count === 0 ? slug : `${slug}-${count}`)
  }
  return anchors
}

/** The link targets of a file's prose (inline code left out) — Markdown links and images, HTML `href` and `src` — with their lines. */
function linksOf(markdown: string): { line: number; target: string }[] {
  const links: { line: number; target: string }[] = []
  for (const { number, text } of proseLines(markdown)) {
    const prose = text.replace(/`[^`]*`/g, '')
    for (const match of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)|\b(?:href|src)="([^"]+)"/g)) links.push({ line: number, target: (match[1] ?? match[2])! })
  }
  return links
}

/** What is wrong with one relative link of `file`, or null. */
function deadLink(file: string, target: string): string | null {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return null // https:, mailto:…: not the manual's to check
  const [path = '', fragment] = target.split('#', 2)
  const absolute = path === '' ? join(repoRoot, file) : resolve(repoRoot, dirname(file), decodeURIComponent(path))
  const inRepo = relative(repoRoot, absolute)
  if (inRepo.startsWith('..')) return `${target}: outside the repository (dead on GitHub)`
  if (!existsSync(absolute)) return `${target}: no such file ${inRepo}`
  if (fragment === undefined) return null
  if (statSync(absolute).isDirectory() || !absolute.endsWith('.md')) return `${target}: an anchor into a file that is not Markdown`
  const anchors = anchorsOf(readFileSync(absolute, 'utf8'))
  return anchors.has(decodeURIComponent(fragment)) ? null : `${target}: ${inRepo} has no heading #${fragment}`
}

describe('the manual’s links', () => {
  test('GitHub’s heading ids', () => {
    expect(headingSlug('Storage faults: a locked database, a full disk, a read-only directory')).toBe(
      'storage-faults-a-locked-database-a-full-disk-a-read-only-directory',
    )
    expect(headingSlug('Run events (SSE)')).toBe('run-events-sse')
    expect(headingSlug('Executor on a large database (SQLite) — the slot handed over')).toBe(
      'executor-on-a-large-database-sqlite--the-slot-handed-over',
    )
    expect(headingSlug('`TRELLIS_HTTP_ALLOW` and **you**')).toBe('trellis_http_allow-and-you')
    expect([...anchorsOf('# A\n## A\n```sh\n# A\n```\n### A')]).toEqual(['a', 'a-1', 'a-2'])
  })

  test.each(MANUAL_FILES)('%s: every relative link and anchor resolves', (file) => {
    const dead = linksOf(readFileSync(join(repoRoot, file), 'utf8')).flatMap(({ line, target }) => {
      const problem = deadLink(file, target)
      return problem ? [`${file}:${line}: ${problem}`] : []
    })
    expect(dead).toEqual([])
  })

  test('every page of docs/ is linked from the README and from docs/README.md', () => {
    const pages = MANUAL_FILES.filter((file) => file.startsWith('docs/') && file !== 'docs/README.md')
    expect(pages).toContain('docs/screenshots/README.md')
    const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8')
    const index = readFileSync(join(repoRoot, 'docs/README.md'), 'utf8')
    expect(pages.filter((page) => !readme.includes(`](${page}`))).toEqual([])
    expect(pages.filter((page) => !index.includes(`](${page.slice('docs/'.length)}`))).toEqual([])
  })
})
