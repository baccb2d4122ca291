// The chaos load: keyed queries over several organizations, each retried with the same
// Idempotency-Key on network errors and retryable codes, against either API process, until it has
// a terminal outcome.
import { request } from 'node:http';
import { demoCatalog } from '../../shared/catalog/demo/index.ts';

export interface Job {
  index: number;
  orgIndex: number;
  key: string;
  kind: 'http_read' | 'browser_read' | 'http_action';
  body: { api: string; operation: string; input: Record<string, unknown> };
}

export interface Outcome {
  status: number;
  /** `ok` for a success, else the error envelope's code. */
  code: string;
  requestId: string | undefined;
  bookingId: string | undefined;
  attempts: number;
  replayed: boolean;
}

const CITIES = ['London', 'New York', 'Paris', 'Tokyo', 'Berlin', 'Madrid'];
const SPECIALTIES = ['general-practice', 'dermatology', 'cardiology', 'physiotherapy'];

/** The operation's price in the demo catalog (what one success must charge). */
export function priceOf(api: string, operation: string): number {
  const op = demoCatalog.find((a) => a.handle === api)?.operations.find((o) => o.name === operation);
  if (!op) throw new Error(`${api} ${operation} is not in the demo catalog`);
  return op.cost_credits;
}

/**
 * Open appointment slots read straight from the demo clinic (not through the service, so nothing
 * is billed): one booking per slot keeps every booking a distinct action the site counts.
 */
export async function openSlots(demoOrigin: string, wanted: number): Promise<string[]> {
  const slots: string[] = [];
  const day = new Date(Date.UTC(2025, 5, 2));
  while (slots.length < wanted) {
    const date = day.toISOString().slice(0, 10);
    day.setUTCDate(day.getUTCDate() + 1);
    if ([0, 6].includes(new Date(`${date}T00:00:00Z`).getUTCDay())) continue;
    for (const specialty of SPECIALTIES) {
      const html = await getWithHost(demoOrigin, 'clinic.example.test', `/appointments/slots?date=${date}&specialty=${specialty}`);
      for (const m of html.matchAll(/data-slot-id="([0-9]{8}-[A-Z]{4}-[0-9]{4})"/g)) if (!slots.includes(m[1]!)) slots.push(m[1]!);
    }
    if (day.getUTCFullYear() > 2026) throw new Error(`only ${slots.length} open slots found`);
  }
  return slots.slice(0, wanted);
}

function getWithHost(origin: string, host: string, path: string): Promise<string> {
  const url = new URL(origin);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path, headers: { host } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The mix: half HTTP reads, a quarter HTTP actions (bookings), a quarter browser reads. */
export function makeJobs(count: number, orgs: number, slots: string[], runId: string): Job[] {
  const jobs: Job[] = [];
  let slot = 0;
  for (let i = 0; i < count; i++) {
    const orgIndex = i % orgs;
    const key = `chaos-${runId}-${i}`;
    const m = i % 8;
    if (m < 4) {
      jobs.push({ index: i, orgIndex, key, kind: 'http_read', body: { api: '@weather', operation: 'current_weather', input: { city: CITIES[i % CITIES.length]! } } });
    } else if (m < 6) {
      const slotId = slots[slot++];
      if (!slotId) throw new Error('not enough open slots');
      jobs.push({ index: i, orgIndex, key, kind: 'http_action', body: { api: '@clinic', operation: 'book_appointment', input: { slot_id: slotId, patient_name: `Chaos Patient ${i}`, email: `chaos${i}@example.com` } } });
    } else {
      const date = `2025-06-${String(2 + (i % 4)).padStart(2, '0')}`;
      jobs.push({ index: i, orgIndex, key, kind: 'browser_read', body: { api: '@clinic', operation: 'find_appointments', input: { date, specialty: SPECIALTIES[i % SPECIALTIES.length]!, max_results: 3 } } });
    }
  }
  return jobs;
}

export interface Sent {
  status: number;
  /** `Idempotency-Replayed: true`: the key's retained outcome, final even when it says retryable. */
  replayed: boolean;
  body: { success?: boolean; data?: { output?: { booking_id?: string }; receipt?: { request_id?: string } }; error?: { code?: string; retryable?: boolean; receipt?: { request_id?: string }; request_id?: string } };
}

/** One POST /v1/query; a network error (the API process killed mid-answer) is an exception. */
export async function send(apiUrl: string, apiKey: string, job: Job, timeoutMs = 240_000): Promise<Sent> {
  const res = await fetch(`${apiUrl}/v1/query`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'idempotency-key': job.key },
    body: JSON.stringify(job.body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let body: Sent['body'];
  try {
    body = JSON.parse(text) as Sent['body'];
  } catch {
    // A proxy-style failure without the envelope: treat as retryable, like a network error.
    throw new Error(`HTTP ${res.status} without a JSON envelope: ${text.slice(0, 200)}`);
  }
  return { status: res.status, replayed: res.headers.get('idempotency-replayed') === 'true', body };
}

export function outcomeOf(sent: Sent, attempts: number): Outcome {
  const ok = sent.status === 200 && sent.body.success === true;
  return {
    status: sent.status,
    code: ok ? 'ok' : (sent.body.error?.code ?? `http_${sent.status}`),
    requestId: sent.body.data?.receipt?.request_id ?? sent.body.error?.receipt?.request_id ?? sent.body.error?.request_id,
    bookingId: ok ? sent.body.data?.output?.booking_id : undefined,
    attempts,
    replayed: sent.replayed,
  };
}

/** Retries on network errors and retryable codes, alternating API processes, until terminal. */
export async function runJob(job: Job, apiUrls: string[], apiKey: string, deadline: number, onRetry: (reason: string) => void): Promise<Outcome> {
  for (let attempt = 1; ; attempt++) {
    const apiUrl = apiUrls[(job.index + attempt) % apiUrls.length]!;
    let reason: string;
    try {
      const sent = await send(apiUrl, apiKey, job);
      // A retryable error tells the client to send the key again; once the answer is the key's
      // retained result (replayed), that is its one terminal outcome, retryable or not.
      const retry = sent.body.error?.retryable === true || (sent.status >= 500 && sent.body.error === undefined);
      if (!retry || sent.replayed) return outcomeOf(sent, attempt);
      reason = sent.body.error?.code ?? `http_${sent.status}`;
    } catch (err) {
      reason = `network: ${err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err)}`.slice(0, 80);
    }
    onRetry(reason);
    if (Date.now() > deadline) throw new Error(`${job.key}: no terminal outcome before the deadline (last: ${reason})`);
    await new Promise((r) => setTimeout(r, Math.min(500 * attempt, 3_000)));
  }
}
