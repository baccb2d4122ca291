// How many times a request sent a header field. Node's parsed headers cannot tell: it keeps the
// first of some repeated fields (Authorization) and joins others with ", " (X-File-Name), so a field
// that must be sent once is counted in the raw header lines.
import type { IncomingMessage } from 'node:http';

export function headerCopies(req: IncomingMessage, name: string): number {
  const raw = req.rawHeaders;
  let copies = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === name) copies++;
  return copies;
}
