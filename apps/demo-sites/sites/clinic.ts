// clinic.example.test — appointment booking: server-rendered slots, a booking
// form and a confirmation page; bookings are idempotent by client reference.
import { Router, bodyFields, esc, hash, html, json, redirect, NO_STORE, type DemoRequest, type Reply, type Site } from '../lib/http.ts';
import { page, notFoundPage } from '../lib/layout.ts';

const BRAND = 'Riverside Health Clinic';
const CSS = `
.slots{list-style:none;padding:0;display:grid;grid-template-columns:repeat(auto-fill,minmax(220px,1fr));gap:.75rem}
.slot{background:#fff;border:1px solid #cfe8e5;border-radius:6px;padding:.75rem}
.confirmation{background:#e0f2f1;border:1px solid #80cbc4;border-radius:6px;padding:1rem 1.5rem}
form.stacked label{display:block;margin-top:.75rem}
`;

const specialties: Record<string, string> = {
  'general-practice': 'General practice',
  dermatology: 'Dermatology',
  cardiology: 'Cardiology',
  physiotherapy: 'Physiotherapy',
};
interface Clinician { code: string; name: string; specialty: string; room: string }
const clinicians: Clinician[] = [
  { code: 'HART', name: 'Dr. Amelia Hart', specialty: 'general-practice', room: 'Room 1' },
  { code: 'MENS', name: 'Dr. Kwame Mensah', specialty: 'general-practice', room: 'Room 2' },
  { code: 'REYE', name: 'Dr. Sofia Reyes', specialty: 'dermatology', room: 'Room 4' },
  { code: 'WEBE', name: 'Dr. Jonas Weber', specialty: 'cardiology', room: 'Room 6' },
  { code: 'OCON', name: "Liam O'Connor", specialty: 'physiotherapy', room: 'Gym' },
];
const TIMES = ['0900', '0930', '1000', '1030', '1100', '1130', '1400', '1430', '1500', '1530', '1600', '1630'];

interface Slot { slot_id: string; date: string; start: string; end: string; clinician: string; specialty: string; specialty_name: string; room: string }
interface Booking { booking_id: string; slot: Slot; patient_name: string; email: string; reference: string | null; status: 'confirmed'; created_at: string }

/** Each server instance gets its own bookings. */
export function createClinicSite(): Site {
  let bookings: Booking[] = [];
  let booked = new Set<string>();
  const REF_RE = /^[A-Za-z0-9._:-]{1,64}$/;
  const EMAIL_RE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

  function validDate(d: string): boolean {
    if (!/^\d{4}-\d{2}-\d{2}$/.test(d)) return false;
    const t = new Date(`${d}T00:00:00Z`);
    return !Number.isNaN(t.getTime()) && t.toISOString().slice(0, 10) === d;
  }
  const isWeekend = (d: string) => [0, 6].includes(new Date(`${d}T00:00:00Z`).getUTCDay());
  const hhmm = (t: string) => `${t.slice(0, 2)}:${t.slice(2)}`;
  function plus30(t: string): string {
    const m = Number(t.slice(0, 2)) * 60 + Number(t.slice(2)) + 30;
    return `${String(Math.floor(m / 60)).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}`;
  }

  function makeSlot(date: string, c: Clinician, t: string): Slot {
    return { slot_id: `${date.replace(/-/g, '')}-${c.code}-${t}`, date, start: `${date}T${hhmm(t)}`, end: `${date}T${plus30(t)}`, clinician: c.name, specialty: c.specialty, specialty_name: specialties[c.specialty], room: c.room };
  }
  /** Fixture availability: a deterministic ~2/3 of the grid is open on weekdays. */
  const openInFixture = (slotId: string) => hash(slotId) % 3 !== 0;

  function availableSlots(date: string, specialty?: string): Slot[] {
    if (isWeekend(date)) return [];
    const out: Slot[] = [];
    for (const t of TIMES)
      for (const c of clinicians) {
        if (specialty && c.specialty !== specialty) continue;
        const s = makeSlot(date, c, t);
        if (openInFixture(s.slot_id) && !booked.has(s.slot_id)) out.push(s);
      }
    return out;
  }
  function parseSlot(id: string): Slot | undefined {
    const m = /^(\d{4})(\d{2})(\d{2})-([A-Z]{4})-(\d{4})$/.exec(id);
    if (!m) return undefined;
    const date = `${m[1]}-${m[2]}-${m[3]}`;
    const c = clinicians.find((x) => x.code === m[4]);
    if (!c || !validDate(date) || !TIMES.includes(m[5]) || isWeekend(date)) return undefined;
    const s = makeSlot(date, c, m[5]);
    return openInFixture(s.slot_id) ? s : undefined;
  }

  type BookResult = { booking: Booking; replayed: boolean } | { status: number; error: string; message: string };
  function book(f: Record<string, string>): BookResult {
    const ref = (f.reference ?? '').trim() || null;
    if (ref !== null && !REF_RE.test(ref)) return { status: 400, error: 'invalid_reference', message: 'Reference must be 1–64 characters of letters, digits, . _ : -' };
    if (ref !== null) {
      const existing = bookings.find((b) => b.reference === ref);
      if (existing) return { booking: existing, replayed: true };
    }
    const slot = parseSlot((f.slot_id ?? '').trim());
    if (!slot) return { status: 404, error: 'slot_not_found', message: 'That appointment slot does not exist.' };
    const name = (f.patient_name ?? '').trim();
    const email = (f.email ?? '').trim();
    if (!name || name.length > 100) return { status: 400, error: 'invalid_patient_name', message: 'Please enter the patient’s name.' };
    if (!EMAIL_RE.test(email)) return { status: 400, error: 'invalid_email', message: 'Please enter a valid email address.' };
    if (booked.has(slot.slot_id)) return { status: 409, error: 'slot_unavailable', message: 'Sorry, that slot has just been booked. Please choose another.' };
    booked.add(slot.slot_id);
    const booking: Booking = { booking_id: `BKG-${String(200001 + bookings.length)}`, slot, patient_name: name, email, reference: ref, status: 'confirmed', created_at: new Date().toISOString() };
    bookings.push(booking);
    return { booking, replayed: false };
  }

  const doc = (title: string, body: string) => page({ title: `${title} | ${BRAND}`, brand: BRAND, nav: [['/', 'Home'], ['/appointments/slots', 'Book an appointment']], css: CSS, body });
  const notFound = (what: string) => html(404, notFoundPage(BRAND, CSS, what));
  const fmtDay = (d: string) => new Date(`${d}T00:00:00Z`).toLocaleDateString('en-GB', { weekday: 'long', day: 'numeric', month: 'long', year: 'numeric', timeZone: 'UTC' });

  function searchForm(date = '', specialty = ''): string {
    return `<form id="slot-search" class="stacked" method="get" action="/appointments/slots">
  <label for="date">Date</label><input id="date" name="date" type="date" value="${esc(date)}" required>
  <label for="specialty">Specialty</label><select id="specialty" name="specialty"><option value="">Any</option>${Object.entries(specialties)
      .map(([s, n]) => `<option value="${s}"${s === specialty ? ' selected' : ''}>${esc(n)}</option>`)
      .join('')}</select>
  <p><button id="find-slots" type="submit">Find available times</button></p></form>`;
  }

  function bookingForm(req: DemoRequest, slot: Slot, status = 200, error?: string, f: Record<string, string> = {}): Reply {
    const ref = f.reference ?? req.query.get('reference') ?? '';
    return html(
      status,
      doc(
        'Book appointment',
        `<h1>Book your appointment</h1>
  <p class="slot-summary" data-slot-id="${slot.slot_id}"><time datetime="${slot.start}">${fmtDay(slot.date)}, ${slot.start.slice(11)}</time> with <span class="clinician">${esc(slot.clinician)}</span> (<span class="specialty">${esc(slot.specialty_name)}</span>)</p>
  ${error ? `<p class="error" role="alert">${esc(error)}</p>` : ''}
  <form id="booking-form" class="stacked" method="post" action="/appointments">
  <input type="hidden" name="slot_id" value="${slot.slot_id}">
  <input type="hidden" id="reference" name="reference" value="${esc(ref)}">
  <label for="patient_name">Patient name</label><input id="patient_name" name="patient_name" autocomplete="name" required value="${esc(f.patient_name ?? '')}">
  <label for="email">Email</label><input id="email" name="email" type="email" autocomplete="email" required value="${esc(f.email ?? '')}">
  <p><button id="book" type="submit">Confirm booking</button></p>
  </form>`,
      ),
      { 'cache-control': NO_STORE },
    );
  }

  function confirmationPage(b: Booking): Reply {
    return html(
      200,
      doc(
        `Booking ${b.booking_id}`,
        `<section class="confirmation" data-booking-id="${b.booking_id}" role="status">
  <h1>Your appointment is booked</h1>
  <dl class="booking-summary">
  <dt>Booking reference</dt><dd class="booking-id">${b.booking_id}</dd>
  <dt>When</dt><dd class="slot-time"><time datetime="${b.slot.start}">${fmtDay(b.slot.date)}, ${b.slot.start.slice(11)}</time></dd>
  <dt>Clinician</dt><dd class="clinician">${esc(b.slot.clinician)}</dd>
  <dt>Specialty</dt><dd class="specialty">${esc(b.slot.specialty_name)}</dd>
  <dt>Where</dt><dd class="room">${esc(b.slot.room)}</dd>
  <dt>Patient</dt><dd class="patient-name">${esc(b.patient_name)}</dd>
  <dt>Slot</dt><dd class="slot-id">${b.slot.slot_id}</dd>
  <dt>Your reference</dt><dd class="reference">${esc(b.reference ?? '')}</dd>
  <dt>Status</dt><dd class="status">${b.status}</dd>
  </dl>
  <p>A confirmation has been sent to ${esc(b.email.replace(/^(.).*(@.*)$/, '$1***$2'))}.</p>
  </section>`,
      ),
      { 'cache-control': NO_STORE },
    );
  }

  const apiBooking = (b: Booking) => ({ booking_id: b.booking_id, slot_id: b.slot.slot_id, start: b.slot.start, end: b.slot.end, clinician: b.slot.clinician, specialty: b.slot.specialty, patient_name: b.patient_name, reference: b.reference, status: b.status, created_at: b.created_at });
  const apiSlot = ({ date: _d, specialty_name: _s, ...s }: Slot) => s;

  const router = new Router(() => notFound('page'))
    .get('/', () =>
      html(200, doc('Appointments', `<h1>${BRAND}</h1><p>Book an appointment online with our clinicians.</p><section class="specialties"><h2>Our services</h2><ul>${Object.entries(specialties).map(([s, n]) => `<li><a class="specialty" href="/appointments/slots?specialty=${s}">${esc(n)}</a></li>`).join('')}</ul></section><section><h2>Find a time</h2>${searchForm()}</section>`)),
    )
    .get('/appointments/slots', (req) => {
      const date = (req.query.get('date') ?? '').trim();
      const specialty = (req.query.get('specialty') ?? '').trim();
      if (specialty && !specialties[specialty]) return html(400, doc('Find a time', `<h1>Find a time</h1><p class="error">Unknown specialty “${esc(specialty)}”.</p>${searchForm(date)}`));
      if (!date) return html(200, doc('Find a time', `<h1>Find a time</h1>${searchForm('', specialty)}`));
      if (!validDate(date)) return html(400, doc('Find a time', `<h1>Find a time</h1><p class="error">Please enter a date as YYYY-MM-DD.</p>${searchForm('', specialty)}`));
      const slots = availableSlots(date, specialty || undefined);
      const list = slots
        .map((s) => `<li class="slot" data-slot-id="${s.slot_id}"><time class="start" datetime="${s.start}">${s.start.slice(11)}</time>–<time class="end" datetime="${s.end}">${s.end.slice(11)}</time> <span class="clinician">${esc(s.clinician)}</span> <span class="specialty" data-slug="${s.specialty}">${esc(s.specialty_name)}</span> <a class="book" href="/appointments/new?slot_id=${s.slot_id}">Book</a></li>`)
        .join('\n');
      const empty = isWeekend(date) ? 'The clinic is closed at weekends.' : 'No appointments available on this day.';
      return html(200, doc(`Available appointments on ${date}`, `<h1>Available appointments</h1><p class="date"><time datetime="${date}">${fmtDay(date)}</time>${specialty ? ` · ${esc(specialties[specialty])}` : ''}</p>${searchForm(date, specialty)}<p class="slot-count" data-count="${slots.length}">${slots.length} appointment${slots.length === 1 ? '' : 's'} available</p>${slots.length ? `<ul class="slots">\n${list}\n</ul>` : `<p class="no-slots">${empty}</p>`}`), { 'cache-control': NO_STORE });
    })
    .get('/appointments/new', (req) => {
      const slot = parseSlot(req.query.get('slot_id') ?? '');
      if (!slot) return notFound('appointment slot');
      if (booked.has(slot.slot_id)) return html(409, doc('Slot unavailable', `<h1>Slot unavailable</h1><p class="error">Sorry, that slot has already been booked.</p><p><a href="/appointments/slots?date=${slot.date}">Choose another time</a></p>`), { 'cache-control': NO_STORE });
      return bookingForm(req, slot);
    })
    .post('/appointments', (req) => {
      const f = bodyFields(req);
      const r = book(f);
      if ('error' in r) {
        const slot = parseSlot(f.slot_id ?? '');
        return slot ? bookingForm(req, slot, r.status, r.message, f) : notFound('appointment slot');
      }
      return redirect(303, `/appointments/${r.booking.booking_id}`);
    })
    .get('/appointments/by-reference/:reference', (req) => {
      const b = bookings.find((x) => x.reference === req.params.reference);
      return b ? confirmationPage(b) : notFound('booking');
    })
    .get('/appointments/:id', (req) => {
      const b = bookings.find((x) => x.booking_id === req.params.id);
      return b ? confirmationPage(b) : notFound('booking');
    })
    // ---- JSON API ----
    .get('/api/slots', (req) => {
      const date = req.query.get('date') ?? '';
      const specialty = req.query.get('specialty') || undefined;
      if (!validDate(date)) return json(400, { error: 'invalid_date', message: '"date" must be YYYY-MM-DD.' });
      if (specialty && !specialties[specialty]) return json(400, { error: 'invalid_specialty', specialties: Object.keys(specialties) });
      return json(200, { date, specialty: specialty ?? null, slots: availableSlots(date, specialty).map(apiSlot) });
    })
    .post('/api/appointments', (req) => {
      const f = bodyFields(req);
      if (!f.reference && req.headers['idempotency-key']) f.reference = String(req.headers['idempotency-key']);
      const r = book(f);
      if ('error' in r) return json(r.status, { error: r.error, message: r.message });
      return json(r.replayed ? 200 : 201, { ...apiBooking(r.booking), replayed: r.replayed }, { location: `/api/appointments/${r.booking.booking_id}` });
    })
    .get('/api/appointments/:id', (req) => {
      const b = bookings.find((x) => x.booking_id === req.params.id);
      return b ? json(200, apiBooking(b)) : json(404, { error: 'booking_not_found' });
    });

  return {
    host: 'clinic.example.test',
    name: BRAND,
    handle: router.handle,
    reset() {
      bookings = [];
      booked = new Set();
    },
    stats: () => ({ bookings: bookings.length }),
  };
}
