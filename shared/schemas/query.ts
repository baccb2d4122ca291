// QueryRequest, Receipt and QueryResult: one schema per concept, used to validate requests,
// type the code and generate OpenAPI and MCP schemas.
import { z } from 'zod';
import { FILE_ID_PATTERN, Handle, OperationName, uniqueItems } from './common.ts';
import {
  FORBIDDEN_KEYS,
  MAX_SCHEMA_DEPTH,
  MAX_TARGET_INDEX,
  MAX_TARGETS_CHARS,
  POINTER_PATTERN,
  pointerProblem,
  schemaIssues,
  sourceIssues,
  targetIssues,
  pointersTooLong,
} from '../format/pointer.ts';

const MAX_SCHEMA_BYTES = 8 * 1024;

const FieldPath = z
  .string()
  .min(1)
  .max(1000)
  .refine((p) => !p.split('.').some((seg) => FORBIDDEN_KEYS.has(seg)), { message: 'must not contain the segment __proto__, constructor or prototype' });

/** A JSON Pointer (RFC 6901) with no segment that reaches a prototype. */
const Pointer = (what: string) =>
  z
    .string()
    .max(1000)
    .superRefine((p, ctx) => {
      const problem = pointerProblem(p);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    })
    .describe(what)
    // The document states the syntax; runtime checks give the precise reason (see pointerProblem).
    .meta({ pattern: POINTER_PATTERN.source });

const FieldPaths = z
  .array(FieldPath)
  .min(1)
  .max(1000)
  .refine(uniqueItems, { message: 'items must be unique' })
  .meta({ uniqueItems: true });

export const ResponseSpec = z
  .strictObject({
    format: z.enum(['json', 'text', 'markdown']).optional().describe('`json` keeps typed output, `text` returns a string, `markdown` renders a document'),
    include: FieldPaths.optional().describe('only these output fields, as paths from the operation selectable_fields'),
    exclude: FieldPaths.optional().describe('every declared output field except these and their nested fields'),
    schema: z
      .record(z.string(), z.unknown())
      .superRefine((s, ctx) => {
        // Walked iteratively first: a deeply nested schema must not reach JSON.stringify's recursion.
        const issues = schemaIssues(s);
        for (const i of issues) ctx.addIssue({ code: 'custom', path: i.path, message: i.message });
        if (issues.length === 0 && new TextEncoder().encode(JSON.stringify(s)).length > MAX_SCHEMA_BYTES)
          ctx.addIssue({ code: 'custom', message: 'must be at most 8 KB' });
      })
      .optional()
      .describe(
        `JSON Schema the output is projected into: at most 8 KB, ${MAX_SCHEMA_DEPTH} levels deep, \$ref only within the schema, no key __proto__, constructor or prototype`,
      ),
    mapping: z
      .array(
        z.strictObject({
          target: Pointer(
            `JSON Pointer into the response schema; each segment a declared property or an array index (0 to ${MAX_TARGET_INDEX}, dense from 0); targets unique, none the parent of another`,
          ),
          source: Pointer('JSON Pointer into the workflow output; sources must not overlap (none equal to or inside another)'),
        }),
      )
      .min(1)
      .max(1000)
      .optional()
      .describe(`explicit field mapping; requires schema; targets total at most ${MAX_TARGETS_CHARS} characters, and so do sources`),
  })
  // The combination rules, for the document (the superRefine below names each offending field).
  .meta({
    not: {
      anyOf: [
        { required: ['include', 'exclude'] },
        { required: ['include', 'schema'] },
        { required: ['include', 'mapping'] },
        { required: ['exclude', 'schema'] },
        { required: ['exclude', 'mapping'] },
      ],
    },
    dependentRequired: { mapping: ['schema'] },
  })
  .superRefine((r, ctx) => {
    const clash = (a: keyof typeof r, b: keyof typeof r) => {
      if (r[a] !== undefined && r[b] !== undefined)
        ctx.addIssue({ code: 'custom', path: [b], message: `cannot be combined with response.${a}` });
    };
    clash('include', 'exclude');
    clash('include', 'schema');
    clash('include', 'mapping');
    clash('exclude', 'schema');
    clash('exclude', 'mapping');
    if (r.mapping !== undefined && r.schema === undefined) ctx.addIssue({ code: 'custom', path: ['mapping'], message: 'requires response.schema' });
    if (r.mapping !== undefined && r.schema !== undefined) {
      const targets = r.mapping.map((m) => m.target);
      const sources = r.mapping.map((m) => m.source);
      for (const i of targetIssues(targets, r.schema)) ctx.addIssue({ code: 'custom', path: ['mapping', ...i.path], message: i.message });
      for (const i of sourceIssues(sources)) ctx.addIssue({ code: 'custom', path: ['mapping', ...i.path], message: i.message });
      if (pointersTooLong(targets)) ctx.addIssue({ code: 'custom', path: ['mapping'], message: `targets may total at most ${MAX_TARGETS_CHARS} characters` });
      if (pointersTooLong(sources)) ctx.addIssue({ code: 'custom', path: ['mapping'], message: `sources may total at most ${MAX_TARGETS_CHARS} characters` });
    }
  });
export type ResponseSpec = z.infer<typeof ResponseSpec>;

const HandleList = z.array(Handle).min(1).max(100).refine(uniqueItems, { message: 'items must be unique' }).meta({ uniqueItems: true });

export const QueryRequest = z
  .strictObject({
    api: Handle.optional().describe('handle including the @; required in direct mode'),
    operation: OperationName.optional().describe('callable operation name (direct mode)'),
    version: z.number().int().min(1).max(2147483647).optional().describe('pins an immutable contract version (direct mode)'),
    input: z.json().optional().describe("operation input; must satisfy the operation's input_schema"),
    prompt: z.string().min(1).max(10000).optional().describe('free text (prompt mode): routed to one operation whose input is filled from it; 5 credits on success plus the operation price'),
    allowed_apis: HandleList.optional().describe('prompt mode: route only within these handles (1 to 100, unique; never also in blocked_apis)'),
    blocked_apis: HandleList.optional().describe('prompt mode: never route to these handles (1 to 100, unique)'),
    attachments: z
      .array(
        z.strictObject({
          id: z.string().regex(FILE_ID_PATTERN).describe("an uploaded file of the caller's organization (POST /v1/files), not expired"),
          purpose: z.enum(['input', 'context']).default('input').describe('`input` may fill a file or text field; `context` only informs routing'),
        }),
      )
      .max(4)
      .optional()
      .describe('prompt mode: at most 4 files'),
    stream: z.boolean().optional().describe('true returns a server-sent event stream'),
    response: ResponseSpec.optional(),
    visibility: z.enum(['public', 'private']).optional().describe('restricts the handle to the public or the private workflow'),
  })
  // The two modes, for the document: direct (api + operation + input, no prompt) or prompt (no
  // operation, input or version). Runtime validation is the superRefine below, which names each
  // offending field instead of one "matches neither" issue.
  .meta({
    oneOf: [
      {
        title: 'Direct mode',
        required: ['api', 'operation', 'input'],
        not: { anyOf: [{ required: ['prompt'] }, { required: ['allowed_apis'] }, { required: ['blocked_apis'] }, { required: ['attachments'] }] },
      },
      { title: 'Prompt mode', required: ['prompt'], not: { anyOf: [{ required: ['operation'] }, { required: ['input'] }, { required: ['version'] }] } },
    ],
    dependentRequired: { visibility: ['api'] },
  })
  .superRefine((q, ctx) => {
    const need = (field: keyof typeof q, why: string) => {
      if (q[field] === undefined) ctx.addIssue({ code: 'custom', path: [field], message: `is required ${why}` });
    };
    const forbid = (field: keyof typeof q, why: string) => {
      if (q[field] !== undefined) ctx.addIssue({ code: 'custom', path: [field], message: `is not allowed ${why}` });
    };
    if (q.prompt !== undefined) {
      forbid('operation', 'in prompt mode');
      forbid('input', 'in prompt mode');
      forbid('version', 'in prompt mode');
      if (q.allowed_apis && q.blocked_apis) {
        const blocked = new Set(q.blocked_apis);
        q.allowed_apis.forEach((h, i) => {
          if (blocked.has(h)) ctx.addIssue({ code: 'custom', path: ['allowed_apis', i], message: 'must not also be in blocked_apis' });
        });
      }
      // A scope that leaves nothing to route to is the caller's contradiction, not an abstention.
      if (q.api !== undefined && q.blocked_apis?.includes(q.api)) ctx.addIssue({ code: 'custom', path: ['api'], message: 'must not be in blocked_apis' });
      if (q.api !== undefined && q.allowed_apis && !q.allowed_apis.includes(q.api))
        ctx.addIssue({ code: 'custom', path: ['api'], message: 'must be one of allowed_apis when both are given' });
    } else {
      need('api', 'in direct mode (or send prompt)');
      need('operation', 'in direct mode');
      need('input', 'in direct mode');
      forbid('allowed_apis', 'in direct mode');
      forbid('blocked_apis', 'in direct mode');
      forbid('attachments', 'in direct mode');
    }
    if (q.visibility !== undefined && q.api === undefined) ctx.addIssue({ code: 'custom', path: ['visibility'], message: 'requires api' });
  });
export type QueryRequest = z.infer<typeof QueryRequest>;

export const BillingStatus = z.enum(['not_started', 'pending', 'settled', 'released']);

export const Receipt = z.strictObject({
  request_id: z.string().regex(/^req_[A-Za-z0-9_-]{10,64}$/),
  api: z.string().nullable(),
  operation: z.string().nullable(),
  billing: z.strictObject({
    status: BillingStatus,
    reserved_credits: z.number(),
    charged_credits: z.number().nullable(),
  }),
});
export type Receipt = z.infer<typeof Receipt>;

export const QueryResult = z.object({
  success: z.literal(true),
  data: z.looseObject({ output: z.json(), receipt: Receipt }),
});
export type QueryResult = z.infer<typeof QueryResult>;

export const RequestStatusValue = z.enum(['reserving', 'processing', 'succeeded', 'rejected', 'refund_pending', 'failed', 'interrupted']);
export type RequestStatusValue = z.infer<typeof RequestStatusValue>;

export const IdempotencyKeyHeader = z.string().regex(/^[!-~]+$/, 'must be printable ASCII without spaces').max(255);
