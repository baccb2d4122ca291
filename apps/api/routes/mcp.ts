// The MCP endpoint: /mcp and /mcp/workflows/{workflow_name}, optionally ?read_only=true.
// Stateless Streamable HTTP: every POST gets a fresh server and transport for its organization.
// Authentication and the workflow lookup happen before the hijack, so their failures are the
// service's ordinary JSON error envelopes (401 with the Bearer challenge naming resource_metadata).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { ServiceError } from '../../../shared/errors.ts';
import { HANDLE_PATTERN } from '../../../shared/schemas/common.ts';
import { authenticateHeader } from '../plugins/auth.ts';
import { buildServer } from '../mcp/server.ts';
import { listOrgTools } from '../mcp/tool-source.ts';
import { PROTECTED_RESOURCE_PATH } from './oauth-metadata.ts';

type McpRequest = FastifyRequest<{ Params: { workflow_name?: string }; Querystring: { read_only?: string } }>;

function readOnlyFlag(value: string | undefined): boolean {
  if (value === undefined || value === 'false' || value === '0') return false;
  if (value === 'true' || value === '1') return true;
  throw new ServiceError('invalid_input', 'read_only must be true or false', {
    param: 'read_only',
    details: { issues: [{ path: 'read_only', message: 'must be true or false' }] },
  });
}

export default async function mcpRoutes(app: FastifyInstance) {
  // Exchanges still open when the API drains are closed; the runs they started go on in Temporal.
  const open = new Set<StreamableHTTPServerTransport>();
  app.addHook('preClose', async () => {
    await Promise.all([...open].map((t) => t.close().catch(() => {})));
  });
  const authenticate = (request: FastifyRequest) =>
    authenticateHeader(app.db, request.headers.authorization, { resource_metadata: `${app.baseUrl()}${PROTECTED_RESOURCE_PATH}` });

  async function handle(request: McpRequest, reply: FastifyReply) {
    const auth = await authenticate(request);
    const readOnly = readOnlyFlag(request.query.read_only);
    const base = app.baseUrl();
    let workflowTools;
    const name = request.params.workflow_name;
    if (name !== undefined) {
      const handle = `@${name}`;
      if (!HANDLE_PATTERN.test(handle)) {
        throw new ServiceError('invalid_input', 'workflow_name must be a handle without the @ (e.g. weather)', {
          param: 'workflow_name',
          details: { issues: [{ path: 'workflow_name', message: 'must match ^[a-z0-9][a-z0-9_-]{0,99}$' }] },
        });
      }
      try {
        workflowTools = await listOrgTools(app.db, base, auth.orgId, { api: handle });
      } catch {
        throw new ServiceError('catalog_unavailable', 'The catalog cannot be read right now', { headers: { 'retry-after': '5' } });
      }
      if (workflowTools.length === 0) throw new ServiceError('unknown_api_slug', `No workflow ${handle} is available to this organization`, { param: 'workflow_name' });
    }

    const server = buildServer({ db: app.db, queries: app.queries, baseUrl: base, orgId: auth.orgId, readOnly }, { workflowTools });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    reply.hijack();
    // A client that leaves ends this exchange only; runs it started go on in Temporal.
    open.add(transport);
    reply.raw.on('close', () => {
      open.delete(transport);
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
  async function notAllowed(request: McpRequest, reply: FastifyReply) {
    await authenticate(request);
    return reply
      .code(405)
      .header('allow', 'POST')
      .type('application/json')
      .send({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed: this MCP server is stateless; send requests with POST' }, id: null });
  }

  for (const url of ['/mcp', '/mcp/workflows/:workflow_name']) {
    app.post(url, handle);
    app.get(url, notAllowed);
    app.delete(url, notAllowed);
  }
}
