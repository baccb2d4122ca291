// Tool definitions (GET /v1/catalog/tools and the MCP server's tool list).
import { z } from 'zod';
import { Handle, queryInt } from './common.ts';

export const TOOLS_PAGE_SIZE = 100;

export const ToolsParams = z.strictObject({
  api: Handle.optional().describe('only this handle'),
  query: z.string().max(100).optional().describe('free text over workflows and operations'),
  operation_id: queryInt(1, Number.MAX_SAFE_INTEGER).describe('only this operation'),
  cursor: z
    .string()
    .regex(/^[0-9]{1,16}$/, 'must be the numeric next_cursor of the previous page')
    .optional()
    .describe("numeric: the previous page's `next_cursor`"),
});
export type ToolsParams = z.infer<typeof ToolsParams>;

export const ToolAnnotations = z
  .looseObject({
    title: z.string().optional(),
    readOnlyHint: z.boolean(),
    destructiveHint: z.boolean(),
    idempotentHint: z.boolean().optional(),
    openWorldHint: z.boolean(),
  })
  .meta({ id: 'ToolAnnotations' });

export const Tool = z
  .looseObject({
    name: z.string().describe('`svc_{operation_id}`, stable across renames'),
    title: z.string(),
    description: z.string().describe('starts with the workflow and its website, ends with the cost'),
    inputSchema: z.record(z.string(), z.unknown()),
    outputSchema: z.record(z.string(), z.unknown()).nullable(),
    annotations: ToolAnnotations,
    operation_id: z.number().int(),
    api: z.string(),
    visibility: z.enum(['public', 'private']),
    operation: z.string(),
    contract_version: z.number().int(),
    cost_credits: z.number(),
    workflow: z.string(),
    site: z.string().nullable(),
    performs_actions: z.boolean(),
  })
  .meta({ id: 'Tool' });
export type Tool = z.infer<typeof Tool>;

export const ToolsResponse = z.strictObject({
  success: z.literal(true),
  data: z.strictObject({ items: z.array(Tool), next_cursor: z.string().nullable() }),
});
