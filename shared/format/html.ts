// Text into HTML: the five characters that could end a text node or an attribute value, as named
// (or, for the apostrophe, numeric) references. For the few pages built without a template.
const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
