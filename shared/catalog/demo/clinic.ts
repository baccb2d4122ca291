// @clinic — Riverside Health Clinic (clinic.example.test): find open appointment times (browser
// engine, through the site's search form) and book one (an action, idempotent by reference).
import type { ApiDefinition } from '../types.ts';
import type { Recipe } from '../../recipes/schema.ts';
import { DATE, site } from './common.ts';

const HOST = 'clinic.example.test';
const SPECIALTIES = ['general-practice', 'dermatology', 'cardiology', 'physiotherapy'];
const SLOT_ID = { type: 'string', pattern: '^[0-9]{8}-[A-Z]{4}-[0-9]{4}$', description: 'Slot id from find_appointments, e.g. 20250610-REYE-0930' } as const;
const TIME = { type: 'string', pattern: '^[0-2][0-9]:[0-5][0-9]$', description: 'Local clinic time, HH:MM' } as const;

const findRecipe: Recipe = {
  engine: 'browser',
  hosts: [HOST],
  steps: [
    { type: 'navigate', name: 'Open the booking page', url: `http://${HOST}/appointments/slots` },
    { type: 'fill', name: 'Enter the date', selector: '#date', value: '{{input.date}}' },
    { type: 'select', name: 'Choose the specialty', selector: '#specialty', value: '{{input.specialty}}' },
    { type: 'click', name: 'Find available times', selector: '#find-slots', wait_for_navigation: true, expect_status: [200, 400] },
    { type: 'fail', when: { selector_present: 'main p.error' }, code: 'invalid_provider_input', message: 'The clinic did not accept the date or specialty' },
    {
      type: 'extract',
      fields: {
        date: { type: 'date', selector: 'p.date time', attribute: 'datetime' },
        available: { type: 'integer', selector: '.slot-count', attribute: 'data-count', default: 0 },
        slots: {
          type: 'list',
          selector: 'ul.slots > li.slot',
          limit: '{{input.max_results}}',
          fields: {
            slot_id: { type: 'attribute', attribute: 'data-slot-id' },
            start_time: { type: 'text', selector: 'time.start' },
            end_time: { type: 'text', selector: 'time.end' },
            clinician: { type: 'text', selector: '.clinician' },
            specialty: { type: 'attribute', selector: '.specialty', attribute: 'data-slug' },
          },
        },
        notice: { type: 'text', selector: '.no-slots' },
      },
      save_as: 'result',
    },
  ],
  output: { date: '{{vars.result.date}}', available: '{{vars.result.available}}', slots: '{{vars.result.slots}}', notice: '{{vars.result.notice}}' },
};

const bookRecipe: Recipe = {
  engine: 'http',
  hosts: [HOST],
  steps: [
    {
      type: 'request',
      name: 'Submit the booking',
      method: 'POST',
      url: `http://${HOST}/appointments`,
      // The reference makes the booking idempotent: a repeated submit returns the same booking.
      form: { slot_id: '{{input.slot_id}}', patient_name: '{{input.patient_name}}', email: '{{input.email}}', reference: '{{run.request_ref}}' },
      parse: 'html',
      action: true,
      expect_status: [200, 400, 409],
      not_found_status: [404],
    },
    { type: 'not_found', when: { status: [409] }, message: 'That appointment slot is no longer available' },
    { type: 'extract', fields: { message: { type: 'text', selector: 'p.error' } }, save_as: 'refusal' },
    { type: 'fail', when: { status: [400] }, code: 'invalid_provider_input', message: 'The clinic refused the booking: {{vars.refusal.message}}' },
    { type: 'fail', when: { selector_absent: '.confirmation[data-booking-id]' }, code: 'action_unconfirmed', message: 'The clinic did not show a booking confirmation' },
    {
      type: 'extract',
      scope: '.confirmation',
      fields: {
        booking_id: { type: 'text', selector: '.booking-id' },
        slot_id: { type: 'text', selector: '.slot-id' },
        starts_at: { type: 'text', selector: '.slot-time time', attribute: 'datetime' },
        clinician: { type: 'text', selector: '.clinician' },
        specialty: { type: 'text', selector: '.specialty' },
        room: { type: 'text', selector: '.room' },
        patient_name: { type: 'text', selector: '.patient-name' },
        status: { type: 'text', selector: '.status' },
      },
      save_as: 'booking',
    },
  ],
  output: '{{vars.booking}}',
};

export const clinicApi: ApiDefinition = {
  handle: '@clinic',
  name: 'Riverside Health Clinic',
  description: 'Find open appointment times at the Riverside Health Clinic by date and specialty, and book one for a patient.',
  category: 'health',
  website_url: `http://${HOST}/`,
  sites: [site('Riverside Health Clinic', HOST)],
  operations: [
    {
      name: 'find_appointments',
      label: 'Find appointment times',
      description:
        'Searches the clinic’s booking page for open half-hour appointments on a date, optionally for one specialty (general practice, dermatology, cardiology, physiotherapy). The clinic is closed at weekends.',
      cost_credits: 1,
      default_version: 1,
      labels: ['clinic', 'doctor', 'appointment', 'availability', 'gp', 'booking'],
      versions: [
        {
          version: 1,
          input_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['date'],
            properties: {
              date: { ...DATE, description: 'Day of the appointment, YYYY-MM-DD' },
              specialty: { type: 'string', enum: SPECIALTIES },
              max_results: { type: 'integer', minimum: 1, maximum: 60, description: 'Most slots to return; all when left out' },
            },
          },
          output_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['date', 'available', 'slots', 'notice'],
            properties: {
              date: DATE,
              available: { type: 'integer', minimum: 0, description: 'Open slots on the day (may exceed the slots returned)' },
              slots: {
                type: 'array',
                items: {
                  type: 'object',
                  additionalProperties: false,
                  required: ['slot_id', 'start_time', 'end_time', 'clinician', 'specialty'],
                  properties: { slot_id: SLOT_ID, start_time: TIME, end_time: TIME, clinician: { type: 'string' }, specialty: { type: 'string', enum: SPECIALTIES } },
                },
              },
              notice: { type: ['string', 'null'], description: 'Why there are no slots, when there are none' },
            },
          },
          recipe: findRecipe,
          examples: [
            {
              title: "Dermatology on a Tuesday, first three",
              input: {
                date: "2025-06-10",
                specialty: "dermatology",
                max_results: 3
              },
              output: {
                date: "2025-06-10",
                available: 7,
                slots: [
                  {
                    slot_id: "20250610-REYE-0930",
                    start_time: "09:30",
                    end_time: "10:00",
                    clinician: "Dr. Sofia Reyes",
                    specialty: "dermatology"
                  },
                  {
                    slot_id: "20250610-REYE-1030",
                    start_time: "10:30",
                    end_time: "11:00",
                    clinician: "Dr. Sofia Reyes",
                    specialty: "dermatology"
                  },
                  {
                    slot_id: "20250610-REYE-1100",
                    start_time: "11:00",
                    end_time: "11:30",
                    clinician: "Dr. Sofia Reyes",
                    specialty: "dermatology"
                  }
                ],
                notice: null
              }
            },
            {
              title: "A Saturday",
              input: {
                date: "2025-06-14"
              },
              output: {
                date: "2025-06-14",
                available: 0,
                slots: [],
                notice: "The clinic is closed at weekends."
              }
            }
          ],
        },
      ],
    },
    {
      name: 'book_appointment',
      label: 'Book an appointment',
      description:
        'Books an open appointment slot (from find_appointments) for a patient and returns the clinic’s booking reference. Repeating the same request never books twice. A slot that is taken or does not exist is not_found.',
      cost_credits: 1,
      default_version: 1,
      performs_actions: true,
      labels: ['clinic', 'appointment', 'book', 'doctor', 'reservation'],
      versions: [
        {
          version: 1,
          input_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['slot_id', 'patient_name', 'email'],
            properties: {
              slot_id: SLOT_ID,
              patient_name: { type: 'string', minLength: 1, maxLength: 100 },
              email: { type: 'string', format: 'email', maxLength: 200 },
            },
          },
          output_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['booking_id', 'slot_id', 'starts_at', 'clinician', 'specialty', 'room', 'patient_name', 'status'],
            properties: {
              booking_id: { type: 'string', pattern: '^BKG-[0-9]{6}$' },
              slot_id: SLOT_ID,
              starts_at: { type: 'string', pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}$', description: 'Local clinic date and time' },
              clinician: { type: 'string' },
              specialty: { type: 'string' },
              room: { type: 'string' },
              patient_name: { type: 'string' },
              status: { type: 'string' },
            },
          },
          recipe: bookRecipe,
          examples: [
            {
              title: "A dermatology appointment",
              input: {
                slot_id: "20250610-REYE-0930",
                patient_name: "Jordan Lee",
                email: "jordan.lee@example.com"
              },
              output: {
                booking_id: "BKG-200001",
                slot_id: "20250610-REYE-0930",
                starts_at: "2025-06-10T09:30",
                clinician: "Dr. Sofia Reyes",
                specialty: "Dermatology",
                room: "Room 4",
                patient_name: "Jordan Lee",
                status: "confirmed"
              }
            },
            {
              title: "A GP appointment",
              input: {
                slot_id: "20250611-HART-1400",
                patient_name: "Sam Patel",
                email: "sam@example.org"
              },
              output: {
                booking_id: "BKG-200001",
                slot_id: "20250611-HART-1400",
                starts_at: "2025-06-11T14:00",
                clinician: "Dr. Amelia Hart",
                specialty: "General practice",
                room: "Room 1",
                patient_name: "Sam Patel",
                status: "confirmed"
              }
            }
          ],
        },
      ],
    },
  ],
};
