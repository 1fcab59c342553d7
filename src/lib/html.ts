/**
 * Note message HTML is sanitised on write with sanitize-html's allow-list (no script, handlers, js:/data: URLs).
 * sanitize-html (with its HTML and CSS parsers) is loaded at the first note written, not at start: it is a large
 * part of a fresh server's memory and start-up time, and many instances write notes rarely.
 */
import type SanitizeHtml from 'sanitize-html'

let sanitizer: { sanitize: typeof SanitizeHtml; options: SanitizeHtml.IOptions } | undefined

function loadSanitizer() {
  const sanitize = require('sanitize-html') as typeof SanitizeHtml
  return { sanitize, options: { ...OPTIONS, transformTags: { a: sanitize.simpleTransform('a', { rel: 'noopener noreferrer nofollow' }) } } }
}

const OPTIONS: SanitizeHtml.IOptions = {
  allowedTags: [
    'p', 'br', 'b', 'strong', 'i', 'em', 'u', 's', 'strike', 'code', 'pre', 'blockquote',
    'ul', 'ol', 'li', 'a', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'span', 'div', 'hr',
    'table', 'thead', 'tbody', 'tr', 'th', 'td', 'sub', 'sup', 'mark',
  ],
  allowedAttributes: { a: ['href', 'title', 'target', 'rel'], td: ['colspan', 'rowspan'], th: ['colspan', 'rowspan'] },
  allowedSchemes: ['http', 'https', 'mailto', 'tel'],
  allowProtocolRelative: false,
  disallowedTagsMode: 'discard',
}

export function sanitizeNoteHtml(html: string): string {
  sanitizer ??= loadSanitizer()
  return sanitizer.sanitize(html, sanitizer.options)
}

/** Plain text typed by a person as note HTML: escaped, blank lines make paragraphs, single newlines `<br>`. */
export function textToNoteHtml(text: string): string {
  return text
    .replace(/\r\n?/g, '\n')
    .trim()
    .split(/\n{2,}/)
    .map((paragraph) => `<p>${Bun.escapeHTML(paragraph.trim()).replace(/\n/g, '<br>')}</p>`)
    .join('')
}
