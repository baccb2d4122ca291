// The MCP endpoint: /mcp and /mcp/workflows/{workflow_name}, optionally ?read_only=true.
// Stateless Streamable HTTP: every POST gets a fresh server and transport for its organization.
// Authentication, the organization's request bucket and the workflow lookup happen before the
// hijack, so their failures are the service's ordinary JSON error envelopes (401 with the Bearer
// challenge naming resource_metadata; 429 organization_rate_limit or authentication_rate_limited
// with Retry-After).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { MAX_BATCH_SIZE } from '@modelcontextprotocol/sdk/server/requestBody.js';
import { ServiceError } from '../../../shared/errors.ts';
import { BEARER, errors } from '../../../shared/openapi/document.ts';
import { JsonRpcMessage } from '../../../shared/openapi/schemas.ts';
import { authenticateHeader, authorizationOf, challenge, type AuthContext } from '../plugins/auth.ts';
import { ACCESS_TOKEN_PATTERN } from '../../../shared/oauth/secrets.ts';
import { MCP_SCOPE, checkAccessToken } from '../../../shared/oauth/grants.ts';
import { documentOnly } from '../plugins/errors.ts';
import { buildServer } from '../mcp/server.ts';
import { OrgSlots } from '../services/org-slots.ts';
import { listOrgTools } from '../mcp/tool-source.ts';
import { MCP_RESOURCE_METADATA_PATH, mcpResource } from './oauth-metadata.ts';

type McpRoute = { Params: { workflow_name?: string }; Querystring: { read_only?: boolean } };
type McpRequest = FastifyRequest<McpRoute>;

const McpQuery = z.strictObject({
  read_only: z
    .enum(['true', 'false', '1', '0'], 'must be true or false')
    .transform((v) => v === 'true' || v === '1')
    .optional()
    .describe('`true` leaves out the tools that change something on a website'),
});
const McpParams = z.strictObject({
  workflow_name: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,99}$/, 'must be a handle without the @ (e.g. weather)').describe('a workflow handle without the @: only its operations, as tools'),
});

const FORBIDDEN_ORIGIN = {
  403: { description: 'JSON-RPC error -32000: the Origin header names a page that may not call this server (MCP_ALLOWED_ORIGINS)', content: { 'application/json': { schema: JsonRpcMessage } } },
};

/**
 * Tokens an exchange takes from the organization's request bucket: one per JSON-RPC message, as
 * each is handled on its own (a batch of 100 tool calls is 100 calls' work, not one). A batch
 * over the SDK's limit is refused whole by the transport before any is handled: it costs that
 * limit. A GET or DELETE (405, nothing handled) and an empty batch cost one, like any request.
 */
export function messagesIn(body: unknown): number {
  return Array.isArray(body) ? Math.min(Math.max(1, body.length), MAX_BATCH_SIZE) : 1;
}

export default async function mcpRoutes(app: FastifyInstance, opts: { allowedOrigins: string[]; getRunWaitsPerOrg: number }) {
  // svc_get_run waits of each organization in this process (apps/api/mcp/runs.ts).
  const getRunWaits = new OrgSlots(opts.getRunWaitsPerOrg);
  // Exchanges still open when the API drains are closed; the runs they started go on in Temporal.
  const open = new Set<StreamableHTTPServerTransport>();
  app.addHook('preClose', async () => {
    await Promise.all([...open].map((t) => t.close().catch(() => {})));
  });
  // An API key, or an OAuth access token for this resource (a cookie is never looked at). After this,
  // both are the same: an organization, billed and scoped exactly alike.
  async function authenticate(request: FastifyRequest): Promise<AuthContext> {
    const base = app.baseUrl();
    const extra = { resource_metadata: `${base}${MCP_RESOURCE_METADATA_PATH}`, scope: MCP_SCOPE };
    const header = authorizationOf(request, extra);
    const token = /^Bearer[ ]+(\S+)\s*$/i.exec(header ?? '')?.[1];
    if (!token || !ACCESS_TOKEN_PATTERN.test(token)) return authenticateHeader(app.db, app.credentialGuard, request.ip, header, extra);
    // Access tokens are looked up like keys, within the same bounds (services/credential-guard.ts).
    const check = await app.credentialGuard.check(request.ip, token, () => checkAccessToken(app.db, token, mcpResource(base)));
    if (!check.ok) {
      throw new ServiceError('invalid_access_token', `The access token is not valid: ${check.reason}`, {
        headers: { 'www-authenticate': challenge('invalid_token', check.reason, extra) },
      });
    }
    // keyId names the credential: for OAuth, the grant (one consent of one user for one client).
    return { orgId: check.orgId, keyId: check.grantId, plan: check.plan };
  }

  async function handle(request: McpRequest, reply: FastifyReply) {
    // JSON-RPC 2.0 §6: an empty array is not a batch but an Invalid Request, answered as one error
    // (the SDK accepted it with 202, as if it held only notifications).
    if (Array.isArray(request.body) && request.body.length === 0) {
      return reply.code(400).type('application/json').send({ jsonrpc: '2.0', error: { code: -32600, message: 'Invalid Request: an empty batch' }, id: null });
    }
    const auth = request.auth!;
    const readOnly = request.query.read_only ?? false;
    const base = app.baseUrl();
    let workflowTools;
    const name = request.params.workflow_name;
    if (name !== undefined) {
      const handle = `@${name}`;
      try {
        workflowTools = await listOrgTools(app.db, base, auth.orgId, { api: handle });
      } catch {
        throw new ServiceError('catalog_unavailable', 'The catalog cannot be read right now', { headers: { 'retry-after': '5' } });
      }
      if (workflowTools.length === 0) throw new ServiceError('unknown_api_slug', `No workflow ${handle} is available to this organization`, { param: 'workflow_name' });
    }

    const server = buildServer(
      { db: app.db, queries: app.queries, baseUrl: base, orgId: auth.orgId, readOnly, getRunWaits, onDelivered: (env, replayed) => app.metrics.recordQuery('mcp', env, replayed) },
      { workflowTools },
    );
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    reply.hijack();
    // A client that leaves ends this exchange only; runs it started go on in Temporal.
    open.add(transport);
    app.metrics.openMcpExchanges.inc();
    reply.raw.on('close', () => {
      if (open.delete(transport)) app.metrics.openMcpExchanges.dec();
      void transport.close();
      void server.close();
    });
    try {
      await server.connect(transport);
      await transport.handleRequest(request.raw, reply.raw, request.body);
    } catch (err) {
      request.log.error({ err }, 'MCP request failed');
      if (!reply.raw.headersSent) {
        reply.raw.writeHead(500, { 'content-type': 'application/json' });
        reply.raw.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal server error' }, id: null }));
      }
    }
  }

  /** Stateless: no standalone SSE stream (GET) and no session to delete (DELETE). */
  async function notAllowed(_request: McpRequest, reply: FastifyReply) {
    return reply
      .code(405)
      .header('allow', 'POST')
      .type('application/json')
      .send({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed: this MCP server is stateless; send requests with POST' }, id: null });
  }

  // A page in a browser may only call from an allowed origin (the MCP transport's rule against DNS
  // rebinding: a present Origin that is not allowed is 403, before anything else); a caller that
  // sends no Origin is not a browser page and is not affected.
  const allowedOrigins = new Set(opts.allowedOrigins);
  const originCheck = async (request: FastifyRequest, reply: FastifyReply) => {
    const origin = request.headers.origin;
    if (origin === undefined || allowedOrigins.has(origin) || origin === new URL(app.baseUrl()).origin) return;
    return reply
      .code(403)
      .type('application/json')
      .send({ jsonrpc: '2.0', error: { code: -32000, message: 'Forbidden: this Origin may not call the MCP server (see MCP_ALLOWED_ORIGINS)' }, id: null });
  };
  // The credential before the body is read (as on POST /v1/query): a caller without a valid one
  // gets its 401 with the resource_metadata challenge (or the failure bucket's 429) whatever it
  // sends, and the body is never parsed for it. Then one token of the organization's request
  // bucket, so the body's parse is the organization's work too (an empty bucket: 429, unread).
  const authenticateMcp = async (request: FastifyRequest) => {
    request.auth = await authenticate(request);
    app.orgRate.admit(request.auth.orgId);
  };
  // Once the body is parsed: an exchange costs one token per JSON-RPC message (messagesIn). The
  // token taken above is given back and the whole cost taken at once, so a batch the bucket cannot
  // hold is refused whole, costing nothing, exactly as if it had been taken here alone.
  const admitMessages = async (request: FastifyRequest) => {
    const cost = messagesIn(request.body);
    if (cost === 1) return;
    const orgId = request.auth!.orgId;
    app.orgRate.giveBack(orgId);
    app.orgRate.admit(orgId, cost);
  };
  // Origin first (403 before anything else), then the credential: Fastify stops at the hook that answers.
  const onRequest = [originCheck, authenticateMcp];
  for (const url of ['/mcp', '/mcp/workflows/:workflow_name']) {
    const variant = url === '/mcp' ? '' : 'Workflow';
    const base = { tags: ['MCP'], security: BEARER, querystring: McpQuery, ...(variant ? { params: McpParams } : {}) };
    app.post<McpRoute>(
      url,
      {
        onRequest,
        preValidation: admitMessages,
        // The JSON-RPC body is the MCP SDK's to check (it answers JSON-RPC errors): documented only.
        validatorCompiler: documentOnly(['body']),
        schema: {
          ...base,
          operationId: `mcp${variant}`,
          summary: variant ? "MCP server limited to one workflow's operations" : 'MCP server (Streamable HTTP)',
          description:
            'JSON-RPC over Streamable HTTP, stateless. `?read_only=true` leaves out action tools. Tools: svc_search_workflows, svc_get_workflow, svc_run_workflow, svc_run_action, svc_get_run (or, per workflow, one tool per operation).',
          body: z.union([JsonRpcMessage, z.array(JsonRpcMessage)]),
          response: {
            ...FORBIDDEN_ORIGIN,
            200: {
              description: 'JSON-RPC response, or an event stream of JSON-RPC messages',
              content: { 'application/json': { schema: JsonRpcMessage }, 'text/event-stream': { schema: z.string().describe('`event: message` frames, `data` one JSON-RPC message') } },
            },
          },
          ...errors(400, 401, 404, 408, 413, 415, 429, 503),
        },
      },
      handle,
    );
    for (const method of ['GET', 'DELETE'] as const) {
      app.route<McpRoute>({
        method,
        url,
        onRequest,
        schema: {
          ...base,
          operationId: `mcp${variant}${method === 'GET' ? 'Get' : 'Delete'}`,
          summary: 'Not offered: this MCP server is stateless (405 JSON-RPC error, Allow: POST)',
          response: { 405: { description: 'JSON-RPC error -32000', content: { 'application/json': { schema: JsonRpcMessage } } }, ...FORBIDDEN_ORIGIN },
          // The credential is checked first here too: its 401, 429 (the organization's bucket, failed
          // checks from the address) and 503 come before the 405.
          ...errors(401, 429, 503),
        },
        handler: notAllowed,
      });
    }
  }
}
