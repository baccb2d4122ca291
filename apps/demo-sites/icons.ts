// One small SVG icon per demo host (served at /favicon.svg on each host).
function svg(bg: string, fg: string, glyph: string): string {
  return `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64" width="64" height="64"><rect width="64" height="64" rx="14" fill="${bg}"/>${glyph.replace(/FG/g, fg)}</svg>`;
}

const sources: Record<string, string> = {
  // open book
  'books.example.test': svg('#7a3e1d', '#fdf3e1', '<path d="M10 18c8-3 15-2 22 3v28c-7-5-14-6-22-3z" fill="FG"/><path d="M54 18c-8-3-15-2-22 3v28c7-5 14-6 22-3z" fill="FG" opacity=".8"/>'),
  // sun behind cloud
  'weather.example.test': svg('#1e88e5', '#ffffff', '<circle cx="24" cy="24" r="10" fill="#ffd54f"/><path d="M18 46a9 9 0 0 1 2-18 12 12 0 0 1 23 3 8 8 0 0 1 1 15z" fill="FG"/>'),
  // briefcase
  'jobs.example.test': svg('#2e7d32', '#ffffff', '<rect x="12" y="22" width="40" height="28" rx="4" fill="FG"/><path d="M25 22v-5h14v5" stroke="FG" stroke-width="4" fill="none"/><rect x="12" y="32" width="40" height="3" fill="#2e7d32"/>'),
  // shopping bag
  'shop.example.test': svg('#6a1b9a', '#ffffff', '<path d="M14 24h36l-3 26H17z" fill="FG"/><path d="M24 24v-4a8 8 0 0 1 16 0v4" stroke="FG" stroke-width="4" fill="none"/>'),
  // medical cross
  'clinic.example.test': svg('#00897b', '#ffffff', '<path d="M26 12h12v14h14v12H38v14H26V38H12V26h14z" fill="FG"/>'),
  // newspaper
  'news.example.test': svg('#212121', '#ffffff', '<rect x="12" y="14" width="40" height="36" rx="3" fill="FG"/><rect x="17" y="19" width="30" height="6" fill="#212121"/><rect x="17" y="29" width="14" height="14" fill="#9e9e9e"/><path d="M35 30h12M35 36h12M35 42h12" stroke="#212121" stroke-width="2.5"/>'),
};

export const demoSiteIcons: Record<string, { content_type: string; bytes: Uint8Array }> = Object.fromEntries(
  Object.entries(sources).map(([host, s]) => [host, { content_type: 'image/svg+xml', bytes: new Uint8Array(Buffer.from(s, 'utf8')) }]),
);
