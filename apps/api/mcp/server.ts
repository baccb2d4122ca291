// The MCP server: a fresh McpServer per HTTP request (stateless Streamable HTTP), built for one
// organization and one variant of the endpoint (`read_only`, `/mcp/workflows/{name}`).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult, type JSONRPCRequest, type Tool as McpTool, type ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { resolveOperation } from '../../../shared/db/catalog.ts';
import { ServiceError, errorEnvelope } from '../../../shared/errors.ts';
import { selectableFields } from '../../../shared/format/shape.ts';
import type { Tool } from '../../../shared/schemas/tools.ts';
import { SERVICE_VERSION } from '../app.ts';
import { boundSearch, boundWorkflow } from './bound.ts';
import { GENERIC_MESSAGE, checkArguments, parseArguments, toolFailure } from './failures.ts';
import { getRun, runOperation, type McpContext, type OnStage, type RunArgs, type ToolAnswer } from './runs.ts';
import {
  GetRunInput,
  GetWorkflowInput,
  GetWorkflowOutput,
  RunInput,
  RunOutput,
  SearchInput,
  SearchOutput,
  jsonSchemaOf,
} from './schemas.ts';
import { listOrgTools, orgToolPages } from './tool-source.ts';

export interface ServerVariant {
  /** `/mcp/workflows/{name}`: the workflow's tools (from the organization's tool list), else undefined. */
  workflowTools?: Tool[];
}

/** What the SDK checks of every tool's arguments: an object; the tools check the rest themselves (see guard). */
const SDK_ARGUMENTS = z.looseObject({});

/**
 * What a run costs, as the query service charges it: the operation's own price (an organization's
 * own workflows set theirs, 0 to 1000), which it used to call a flat "1 credit".
 */
const COST =
  "Each completed run costs the operation's cost_credits (svc_search_workflows and svc_get_workflow show it; the receipt says what was charged).";

const READ: ToolAnnotations = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };

export function buildServer(ctx: McpContext, variant: ServerVariant = {}): McpServer {
  const server = new McpServer(
    { name: 'workflow-query-service', title: 'Workflow Query Service', version: SERVICE_VERSION },
    {
      instructions:
        'Run website tasks (workflows) with typed inputs and outputs. Find one with svc_search_workflows, read its input schema with svc_get_workflow, ' +
        'then run it with svc_run_workflow (read-only operations) or svc_run_action (operations that change a website, only when the user asked). ' +
        'A run that takes longer than wait_seconds answers status "running"; fetch it with svc_get_run.',
    },
  );
  // The SDK answers a throwing handler with the error's own text: only its own messages about the
  // call (arguments that fail the tool's schema, an unknown or disabled tool) may pass, so the
  // caller can correct the call; anything else (a stack overflow in a dependency, say) is generic.
  const sdkToolError: (message: string) => CallToolResult = Reflect.get(server, 'createToolError').bind(server);
  Object.defineProperty(server, 'createToolError', {
    value: (message: string): CallToolResult => sdkToolError(isCallerMistake(message) ? message : GENERIC_MESSAGE),
  });
  /**
   * Every handler: arguments checked for depth and size first, then against the tool's input schema
   * (`shape`, strict; none for a workflow tool, whose input the query service checks), and no
   * exception escapes as text. The SDK is given an open object (SDK_ARGUMENTS) so that a refusal is
   * the service's invalid_input envelope with param and details.issues, bounded, not the SDK's
   * text listing every issue.
   */
  const guard =
    <A,>(kind: 'run' | 'free', shape: z.ZodRawShape | null, handler: (args: A, extra: unknown) => Promise<CallToolResult>) => {
      const schema = shape ? z.strictObject(shape) : null;
      return async (raw: Record<string, unknown>, extra: unknown): Promise<CallToolResult> => {
        const fail = (err: ServiceError) => (kind === 'run' ? answer(runError(err, ctx.baseUrl)) : answer(toolError(err, ctx.baseUrl)));
        const bad = checkArguments(raw);
        if (bad) return fail(bad);
        let args = raw as A;
        if (schema) {
          const parsed = parseArguments(schema, raw);
          if (!parsed.ok) return fail(parsed.error);
          args = parsed.data as A;
        }
        try {
          return await handler(args, extra);
        } catch (e) {
          return fail(toolFailure(e, kind === 'run' ? 'engine_unavailable' : 'catalog_unavailable'));
        }
      };
    };
  // What tools/list shows: the SDK derives JSON Schema from zod, the workflow tools carry the operation's own schemas.
  const listed: McpTool[] = [];
  const add = (def: McpTool, register: () => void) => {
    listed.push(def);
    register();
  };
  /**
   * A service tool: listed with its own input schema, given to the SDK with the open one
   * (SDK_ARGUMENTS), and its arguments checked against its own by guard.
   */
  type ServiceTool = Parameters<typeof toolDefinition>[1];
  const addTool = <A,>(name: string, t: ServiceTool, kind: 'run' | 'free', handler: (args: A, extra: unknown) => Promise<CallToolResult>) =>
    add(toolDefinition(name, t), () => server.registerTool(name, { ...t, inputSchema: SDK_ARGUMENTS }, guard(kind, t.inputSchema, handler)));

  if (variant.workflowTools) {
    for (const tool of variant.workflowTools) {
      if (ctx.readOnly && tool.performs_actions) continue;
      add(operationToolDefinition(tool), () =>
        server.registerTool(
          tool.name,
          {
            title: tool.title,
            description: tool.description,
            // The operation's schema (shown in tools/list) is enforced by the query service with its own validator.
            inputSchema: SDK_ARGUMENTS,
            outputSchema: RunOutput,
            annotations: tool.annotations as ToolAnnotations,
          },
          guard('run', null, async (args: Record<string, unknown>, extra) =>
            // The tool is one operation: its visibility keeps a private operation of the same name from answering for a public one.
            answer(await runOperation(ctx, { api: tool.api, operation: tool.operation, visibility: tool.visibility, input: args }, 'any', stageReporter(extra), signalOf(extra), 'input')),
          ),
        ),
      );
    }
  } else {
    const search = {
      title: 'Search workflows',
      description:
        'Search the workflows this organization can run (public and its private ones) by free text or handle; answers each workflow with its operations. Free.',
      inputSchema: SearchInput,
      outputSchema: SearchOutput,
      annotations: { ...READ, title: 'Search workflows' },
    };
    addTool('svc_search_workflows', search, 'free', async (args: SearchArgs) => answer(await searchWorkflows(ctx, args)));

    const get = {
      title: 'Get a workflow',
      description:
        "List a workflow's operations, or with `operation` one operation's input and output schemas, selectable fields and verified examples. Read the input schema before running. Free.",
      inputSchema: GetWorkflowInput,
      outputSchema: GetWorkflowOutput,
      annotations: { ...READ, title: 'Get a workflow' },
    };
    addTool('svc_get_workflow', get, 'free', async (args: GetWorkflowArgs) => answer(await getWorkflow(ctx, args)));

    const runRead = {
      title: 'Run a workflow',
      description:
        'Run a read-only operation of a workflow (one that does not change anything on a website) and answer its typed output with a receipt. ' +
        'Waits up to wait_seconds (default 50); a slower run answers status "running" with a request_id for svc_get_run. ' + COST,
      inputSchema: RunInput,
      outputSchema: RunOutput,
      annotations: { title: 'Run a workflow', readOnlyHint: true, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    };
    addTool('svc_run_workflow', runRead, 'run', async (args: RunArgs, extra) => answer(await runOperation(ctx, args, 'read', stageReporter(extra), signalOf(extra))));

    if (!ctx.readOnly) {
      const runAction = {
        title: 'Run an action',
        description:
          'Run an operation that changes something on a website (send, book, order, cancel). Use it only when the user asked for that action; check the result ' +
          'or svc_get_run before repeating one, since an action may have completed even if its answer was lost. ' + COST,
        inputSchema: RunInput,
        outputSchema: RunOutput,
        annotations: { title: 'Run an action', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
      };
      addTool('svc_run_action', runAction, 'run', async (args: RunArgs, extra) => answer(await runOperation(ctx, args, 'action', stageReporter(extra), signalOf(extra))));
    }
  }

  const getRunTool = {
    title: 'Get a run',
    description:
      'The result of a run by request_id (for example one that answered status "running"), available for 24 hours; waits up to wait_seconds while it still runs. Free.',
    inputSchema: GetRunInput,
    outputSchema: RunOutput,
    annotations: { ...READ, title: 'Get a run' },
  };
  addTool('svc_get_run', getRunTool, 'run', async (args: GetRunArgs, extra) => answer(await getRun(ctx, args, stageReporter(extra), signalOf(extra))));

  // Every tool in one answer: no cursor is ever given, so any cursor sent is invalid (-32602).
  server.server.setRequestHandler(ListToolsRequestSchema, (request) => {
    if (request.params?.cursor !== undefined) throw new McpError(ErrorCode.InvalidParams, 'Invalid cursor: this server lists every tool in one answer and never gives a cursor');
    return { tools: listed };
  });
  // Stateless: no exchange outlives its request, so a change to the list could never be announced.
  server.server.registerCapabilities({ tools: { listChanged: false } });
  protocolErrors(server, new Set(listed.map((t) => t.name)));
  return server;
}

type RequestHandler = (request: JSONRPCRequest, extra: unknown) => Promise<unknown>;

/**
 * JSON-RPC's own errors where the SDK would answer otherwise: a request whose params do not parse
 * is -32602 Invalid params with a short message (the SDK sends -32603 with the schema library's
 * whole issue dump), and tools/call naming a tool this server does not offer is -32602 "Unknown
 * tool" (a protocol error in the MCP spec; the SDK answers a tool result with isError).
 */
function protocolErrors(server: McpServer, tools: Set<string>) {
  const handlers = Reflect.get(server.server, '_requestHandlers') as Map<string, RequestHandler>;
  for (const [method, handler] of handlers) {
    handlers.set(method, async (request, extra) => {
      if (method === 'tools/call') {
        const name = (request.params as { name?: unknown } | undefined)?.name;
        if (typeof name === 'string' && !tools.has(name)) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name.slice(0, 128)}`);
      }
      try {
        return await handler(request, extra);
      } catch (e) {
        // The SDK's request schemas are zod (classic or mini: ZodError or $ZodError), thrown as they are.
        const name = (e as { name?: unknown } | null)?.name;
        const issues = typeof name === 'string' && /ZodError$/.test(name) ? (e as { issues?: Array<{ path: PropertyKey[]; message: string }> }).issues : undefined;
        if (!Array.isArray(issues)) throw e;
        const said = issues.slice(0, 5).map((i) => `${i.path.map(String).join('.') || 'request'}: ${i.message}`);
        throw new McpError(ErrorCode.InvalidParams, `Invalid params: ${said.join('; ')}`.slice(0, 500));
      }
    });
  }
}

function toolDefinition(
  name: string,
  t: { title: string; description: string; inputSchema: z.ZodRawShape; outputSchema: z.ZodRawShape; annotations: ToolAnnotations },
): McpTool {
  return {
    name,
    title: t.title,
    description: t.description,
    inputSchema: jsonSchemaOf(t.inputSchema, 'input') as McpTool['inputSchema'],
    outputSchema: jsonSchemaOf(t.outputSchema, 'output') as McpTool['outputSchema'],
    annotations: t.annotations,
  };
}

/** A workflow tool as listed: the tool listing's name and text, the operation's input schema, the run envelope around its output schema. */
function operationToolDefinition(tool: Tool): McpTool {
  const envelope = jsonSchemaOf(RunOutput, 'output') as { properties: Record<string, unknown> };
  if (tool.outputSchema) {
    envelope.properties.output = { ...tool.outputSchema, description: 'the workflow output (omitted while running or when shortened past its schema)' };
  }
  return {
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: { ...tool.inputSchema, type: 'object' } as McpTool['inputSchema'],
    outputSchema: envelope as McpTool['outputSchema'],
    annotations: tool.annotations as ToolAnnotations,
  };
}

function answer(a: ToolAnswer | { result: Record<string, unknown>; isError: boolean; textOnly?: boolean }): CallToolResult {
  const text: CallToolResult = { content: [{ type: 'text', text: JSON.stringify(a.result) }], isError: a.isError };
  // Clients validate structured content against the output schema even on errors: the free tools' errors are text only.
  return 'textOnly' in a && a.textOnly ? text : { ...text, structuredContent: a.result as Record<string, unknown> };
}

type Extra = { signal?: AbortSignal; _meta?: { progressToken?: string | number }; sendNotification: (n: { method: 'notifications/progress'; params: { progressToken: string | number; progress: number; total?: number; message?: string } }) => Promise<void> };

/** Aborted when the call's exchange closes (the client left; a stateless exchange cannot hear a later cancel): a wait for the run ends then. */
const signalOf = (extra: unknown): AbortSignal | undefined => (extra as Extra).signal;

/** MCP progress notifications when the client asked for them (a progressToken): the workflow's stages. */
function stageReporter(extra: unknown): OnStage | undefined {
  const e = extra as Extra;
  const token = e._meta?.progressToken;
  if (token === undefined) return undefined;
  const order = ['accepted', 'preparing', 'executing', 'formatting', 'settling', 'done'];
  let last = 0;
  return (stage, message) => {
    const n = Math.max(last + 1, order.indexOf(stage) + 1);
    last = n;
    void e.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: n, total: order.length, message } }).catch(() => {});
  };
}

type SearchArgs = { query?: string; api?: string; limit?: number; max_chars?: number };
type GetWorkflowArgs = { api: string; operation?: string; max_chars?: number };
type GetRunArgs = { request_id: string; wait_seconds?: number; max_chars?: number };

async function searchWorkflows(ctx: McpContext, args: SearchArgs) {
  try {
    const limit = args.limit ?? 20;
    const filter = { api: args.api, query: args.query, readOnly: ctx.readOnly };
    const group = (tools: Iterable<Tool>) => {
      const groups = new Map<string, { api: string; name: string; visibility: 'public' | 'private'; site: string | null; operations: ReturnType<typeof summary>[] }>();
      for (const t of tools) {
        const k = `${t.visibility}:${t.api}`;
        if (!groups.has(k)) groups.set(k, { api: t.api, name: t.workflow, visibility: t.visibility, site: t.site, operations: [] });
        groups.get(k)!.operations.push(summary(t));
      }
      return [...groups.values()];
    };
    // Pages are read only until a workflow past `limit` shows up (the answer is cut there anyway): a
    // search over a catalog of thousands reads a page or two, not every tool with its schemas. The
    // shown workflows' operations are then read whole (one added by a later version has a later id,
    // maybe past where the reading stopped).
    const seen: Tool[] = [];
    const workflows = new Set<string>();
    let cut = false;
    for await (const page of orgToolPages(ctx.db, ctx.baseUrl, ctx.orgId, filter)) {
      seen.push(...page);
      for (const t of page) workflows.add(`${t.visibility}:${t.api}`);
      if (workflows.size > limit) {
        cut = true;
        break;
      }
    }
    let all = group(seen);
    if (cut) {
      const shown = new Set(all.slice(0, limit).map((w) => `${w.visibility}:${w.api}`));
      const whole = await listOrgTools(ctx.db, ctx.baseUrl, ctx.orgId, { ...filter, apis: [...new Set(all.slice(0, limit).map((w) => w.api))] });
      all = [...group(whole.filter((t) => shown.has(`${t.visibility}:${t.api}`))), ...all.slice(limit)];
    }
    const result: { workflows: typeof all; truncated: boolean; message?: string } = { workflows: all.slice(0, limit), truncated: all.length > limit };
    if (result.truncated) result.message = `More workflows match than the ${limit} shown. Narrow with query or api, or raise limit (up to 100).`;
    return { isError: false, result: boundSearch(result, args.max_chars) };
  } catch {
    return toolError(new ServiceError('catalog_unavailable', 'The catalog cannot be read right now'), ctx.baseUrl);
  }
}

async function getWorkflow(ctx: McpContext, args: GetWorkflowArgs) {
  const a = await getWorkflowUnbounded(ctx, args);
  return a.isError ? a : { ...a, result: boundWorkflow(a.result, args.max_chars) };
}

async function getWorkflowUnbounded(ctx: McpContext, args: GetWorkflowArgs) {
  let tools: Tool[];
  try {
    tools = (await listOrgTools(ctx.db, ctx.baseUrl, ctx.orgId, { api: args.api })).filter((t) => !(ctx.readOnly && t.performs_actions));
  } catch {
    return toolError(new ServiceError('catalog_unavailable', 'The catalog cannot be read right now'), ctx.baseUrl);
  }
  if (tools.length === 0) return toolError(new ServiceError('unknown_api_slug', `No workflow ${args.api} is available to this organization`, { param: 'api' }), ctx.baseUrl);
  // A private workflow wins over a public one of the same handle, as in queries; the public one's
  // operations it does not shadow stay reachable through the handle, so they are listed too.
  const side = tools.some((t) => t.visibility === 'private') ? 'private' : 'public';
  const mine = tools.filter((t) => t.visibility === side);
  const reachable = [...mine, ...tools.filter((t) => t.visibility !== side && !mine.some((m) => m.operation === t.operation))];
  const head = { api: mine[0]!.api, name: mine[0]!.workflow, visibility: side as 'public' | 'private' };
  if (!args.operation) return { isError: false as const, result: { ...head, operations: reachable.map(summary) } as WorkflowAnswer };

  const tool = mine.find((t) => t.operation === args.operation) ?? tools.find((t) => t.operation === args.operation);
  if (!tool) {
    return toolError(
      new ServiceError('unknown_operation', `${args.api} has no operation named ${args.operation}; operations: ${reachable.map((t) => t.operation).join(', ')}`, { param: 'operation' }),
      ctx.baseUrl,
    );
  }
  let res: Awaited<ReturnType<typeof resolveOperation>>;
  try {
    res = await resolveOperation(ctx.db, ctx.orgId, { api: tool.api, operation: tool.operation, visibility: tool.visibility });
  } catch (e) {
    return toolError(toolFailure(e, 'catalog_unavailable'), ctx.baseUrl);
  }
  if (!res.ok) return toolError(new ServiceError(res.code, `${tool.api} ${tool.operation} is not available`, { param: 'operation' }), ctx.baseUrl);
  const op = res.op;
  return {
    isError: false as const,
    result: {
      ...head,
      visibility: tool.visibility,
      operation: {
        operation: op.operation,
        operation_id: op.operationId,
        description: tool.description,
        performs_actions: op.performsActions,
        cost_credits: op.costCredits,
        contract_version: op.version,
        input_schema: op.inputSchema,
        output_schema: op.outputSchema,
        selectable_fields: selectableFields(op.outputSchema),
        examples: op.examples as unknown[],
      },
    } as WorkflowAnswer,
  };
}

type WorkflowAnswer = {
  api: string;
  name: string;
  visibility: 'public' | 'private';
  operations?: ReturnType<typeof summary>[];
  operation?: {
    description: string;
    input_schema: Record<string, unknown>;
    output_schema: Record<string, unknown>;
    selectable_fields: string[];
    examples: unknown[];
  } & Record<string, unknown>;
  truncated?: boolean;
  message?: string;
};

function summary(t: Tool) {
  return {
    operation: t.operation,
    operation_id: t.operation_id,
    tool: t.name,
    title: t.title,
    description: t.description,
    performs_actions: t.performs_actions,
    cost_credits: t.cost_credits,
    contract_version: t.contract_version,
    visibility: t.visibility,
  };
}

/** Free tools fail with the Error envelope as text; they declare no `status` field to fill. */
function toolError(err: ServiceError, baseUrl: string) {
  const env = errorEnvelope(err.code, { message: withRetryHint(err), param: err.param, details: err.details, baseUrl });
  return { isError: true as const, textOnly: true, result: { ...env } as Record<string, unknown> };
}

/** A run tool's failure before or outside a run: the run answer with status "failed". */
function runError(err: ServiceError, baseUrl: string) {
  const env = errorEnvelope(err.code, { message: err.message, param: err.param, details: err.details, baseUrl });
  return { isError: true, result: { status: 'failed', request_id: null, api: null, operation: null, truncated: false, error: { ...env.error }, message: withRetryHint(err) } as Record<string, unknown> };
}

function withRetryHint(err: ServiceError): string {
  const after = err.headers?.['retry-after'];
  return after ? `${err.message} (retry after ${after} s)` : err.message;
}

/** The SDK's McpError texts (`MCP error -32602: …`) that describe the caller's own call. */
export function isCallerMistake(message: string): boolean {
  return /^(MCP error -32602: )?(Input validation error|Invalid arguments for tool|Tool [\w-]{1,128} (not found|disabled)$)/.test(message);
}
