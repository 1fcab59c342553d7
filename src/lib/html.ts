/** Note message HTML is sanitised on write with sanitize-html's allow-list (no script, handlers, js:/data: URLs). */
import sanitizeHtml from 'sanitize-html'

const OPTIONS: sanitizeHtml.IOptions = {
  allowedTags: [
    'p', 'br', 'b', 'strong', 'i', 'em', 'u', 's', 'strike', 'code', 'pre', 'blockquote',
    'ul', 'ol', 'li', 'a', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'span', 'div', 'hr',
    'table', 'thead', 'tbody', 'tr', 'th', 'td', 'sub', 'sup', 'mark',
  ],
  allowedAttributes: { a: ['href', 'title', 'target', 'rel'], td: ['colspan', 'rowspan'], th: ['colspan', 'rowspan'] },
  allowedSchemes: ['http', 'https', 'mailto', 'tel'],
  allowProtocolRelative: false,
  disallowedTagsMode: 'discard',
  transformTags: { a: sanitizeHtml.simpleTransform('a', { rel: 'noopener noreferrer nofollow' }) },
}

export function sanitizeNoteHtml(html: string): string {
  return sanitizeHtml(html, OPTIONS)
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
