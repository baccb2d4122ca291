// Input and output schemas of the MCP tools: one zod schema per concept, turned into the JSON
// Schema clients see (tools/list) and used by the SDK to validate calls and results.
import { z } from 'zod';
import { Handle, OperationName } from '../../../shared/schemas/common.ts';
import { IDEMPOTENCY_KEY_PATTERN, REQUEST_ID_PATTERN } from '../../../shared/ids.ts';

export const WAIT_SECONDS = { min: 1, max: 170, default: 50 } as const;
export const MAX_CHARS = { min: 1000, max: 150_000, default: 20_000 } as const;

const FieldPaths = z.array(z.string().min(1).max(1000)).min(1).max(1000);

const waitSeconds = z
  .number()
  .int()
  .min(WAIT_SECONDS.min)
  .max(WAIT_SECONDS.max)
  .optional()
  .describe('How long to wait for the run, 1 to 170 seconds (default 50). A slower run answers status "running" with a request_id for svc_get_run.');
const maxChars = z
  .number()
  .int()
  .min(MAX_CHARS.min)
  .max(MAX_CHARS.max)
  .optional()
  .describe(
    'Cap on the whole answer (its JSON text), 1000 to 150000 characters (default 20000). What does not fit is shortened or left out, marked truncated, and message says how to ask for less.',
  );

export const SearchInput = {
  query: z.string().max(100).optional().describe('Free text over workflow names, descriptions and operations, up to 100 characters. Omit to list everything.'),
  api: Handle.optional().describe('Only this workflow handle, including the @ (e.g. @weather).'),
  limit: z.number().int().min(1).max(100).optional().describe('Workflows per answer, 1 to 100 (default 20).'),
  max_chars: maxChars,
};

const OperationSummary = z.object({
  operation: z.string().describe('callable operation name'),
  operation_id: z.number().int(),
  tool: z.string().describe('tool name of this operation (svc_{operation_id})'),
  title: z.string(),
  description: z.string(),
  performs_actions: z.boolean().describe('true when running it changes something on a website; run it with svc_run_action'),
  cost_credits: z.number(),
  contract_version: z.number().int(),
  visibility: z
    .enum(['public', 'private'])
    .optional()
    .describe("which of the handle's workflows the operation belongs to (svc_get_workflow: the public one's operations that the private one does not shadow are listed too)"),
});

export const SearchOutput = {
  workflows: z
    .array(
      z.object({
        api: z.string().describe('handle including the @'),
        name: z.string(),
        visibility: z.enum(['public', 'private']),
        site: z.string().nullable().describe('host the workflow reads'),
        operations: z.array(OperationSummary),
      }),
    )
    .describe('matching workflows with their operations'),
  truncated: z.boolean().describe('true when more workflows matched than `limit`, or some were left out to fit max_chars'),
  message: z.string().optional().describe('when truncated: how to narrow the search'),
};

export const GetWorkflowInput = {
  api: Handle.describe('Workflow handle including the @ (e.g. @books).'),
  operation: OperationName.optional().describe("One operation's name: answer its input and output schemas, selectable fields and examples. Omit to list the operations."),
  max_chars: maxChars,
};

export const GetWorkflowOutput = {
  api: z.string(),
  name: z.string(),
  visibility: z.enum(['public', 'private']),
  operations: z.array(OperationSummary).optional().describe('all operations (when no operation was named)'),
  operation: z
    .object({
      operation: z.string(),
      operation_id: z.number().int(),
      description: z.string(),
      performs_actions: z.boolean(),
      cost_credits: z.number(),
      contract_version: z.number().int(),
      input_schema: z.record(z.string(), z.unknown()).describe('JSON Schema of `input`; take inputs from it, do not guess them from names'),
      output_schema: z.record(z.string(), z.unknown()),
      selectable_fields: z.array(z.string()).describe('paths usable in include / exclude'),
      examples: z.array(z.unknown()).describe('verified examples: {title?, input, output}'),
    })
    .optional()
    .describe('the named operation'),
  truncated: z.boolean().optional().describe('true when parts were left out to fit max_chars (see message)'),
  message: z.string().optional().describe('what was left out and how to get it'),
};

export const RunInput = {
  api: Handle.describe('Workflow handle including the @ (e.g. @weather).'),
  operation: OperationName.describe('Callable operation name (see svc_get_workflow).'),
  input: z.record(z.string(), z.unknown()).describe("Operation input; must satisfy the operation's input_schema (see svc_get_workflow)."),
  version: z.number().int().min(1).max(2147483647).optional().describe("Pins an immutable contract version; omit for the operation's default."),
  include: FieldPaths.optional().describe('Only these output fields (paths from selectable_fields). Not with exclude.'),
  exclude: FieldPaths.optional().describe('Every output field except these. Not with include.'),
  wait_seconds: waitSeconds,
  max_chars: maxChars,
  idempotency_key: z
    .string()
    .regex(IDEMPOTENCY_KEY_PATTERN)
    .optional()
    .describe('Optional Idempotency-Key (printable ASCII, at most 255): retrying with the same key and arguments returns the retained result instead of running and charging again.'),
};

export const GetRunInput = {
  request_id: z.string().regex(REQUEST_ID_PATTERN).describe('request_id of a run (from a run tool answering status "running").'),
  wait_seconds: waitSeconds,
  max_chars: maxChars,
};

const Receipt = z.object({
  request_id: z.string(),
  api: z.string().nullable(),
  operation: z.string().nullable(),
  billing: z.object({
    status: z.enum(['not_started', 'pending', 'settled', 'released']),
    reserved_credits: z.number(),
    charged_credits: z.number().nullable(),
  }),
});

const ToolError = z
  .looseObject({
    type: z.string(),
    code: z.string().describe('branch on this'),
    message: z.string(),
    status: z.number().int().describe('HTTP status of the same failure over REST'),
    retryable: z.boolean().optional(),
  })
  .describe('the Error envelope of the failure');

export const RunOutput = {
  status: z
    .enum(['succeeded', 'failed', 'running', 'refused'])
    .describe('"running": still working, call svc_get_run with request_id; "refused": not run, nothing charged'),
  request_id: z.string().nullable().describe('the run (null when nothing was started)'),
  api: z.string().nullable(),
  operation: z.string().nullable(),
  output: z.unknown().optional().describe('the workflow output (possibly shortened, see truncated)'),
  truncated: z.boolean().describe('true when output was shortened to max_chars'),
  receipt: Receipt.optional().describe('billing receipt'),
  error: ToolError.optional(),
  replayed: z.boolean().optional().describe('true when an idempotency_key returned a retained result'),
  message: z.string().optional().describe('what to do next'),
};
export const RunOutputSchema = z.object(RunOutput);
export type RunResult = z.infer<typeof RunOutputSchema>;

/**
 * JSON Schema for tools/list (draft-07: what MCP clients validate with). Inputs are strict
 * (`additionalProperties: false`), as the tools check them: an argument a tool does not take is refused.
 */
export function jsonSchemaOf(shape: z.ZodRawShape, io: 'input' | 'output'): Record<string, unknown> {
  const object = io === 'input' ? z.strictObject(shape) : z.object(shape);
  const { $schema: _s, ...schema } = z.toJSONSchema(object, { target: 'draft-7', io, unrepresentable: 'any' }) as Record<string, unknown>;
  return schema;
}
