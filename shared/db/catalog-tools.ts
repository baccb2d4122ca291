// Tool definitions: every operation an organization can call (public ones and its own private
// ones), as GET /v1/catalog/tools and the MCP server list them. Same reach as resolveOperation.
import { TOOLS_PAGE_SIZE, type Tool } from '../schemas/tools.ts';
import { ServiceError } from '../errors.ts';
import { queryWords } from './catalog-search.ts';
import type { Db } from './pool.ts';

export interface ListToolsOptions {
  api?: string;
  /** Only these workflows (handles), whichever side each is on. */
  apis?: string[];
  query?: string;
  operation_id?: number;
  /** The previous page's next_cursor (the last operation id, as a decimal string). */
  cursor?: string | number;
  /** Page size; 100 unless told otherwise (MCP may ask for fewer). */
  limit?: number;
  /** Leave out operations that change something on a website (MCP `read_only=true`). */
  readOnly?: boolean;
  baseUrl: string;
}

export function toolName(operationId: number): string {
  return `svc_${operationId}`;
}

function costText(credits: number): string {
  return `Cost: ${credits} ${credits === 1 ? 'credit' : 'credits'} per completed run.`;
}

/** The description: workflow and website first, what the operation does, the cost last. */
export function toolDescription(r: { workflow: string; site: string | null; website_url: string | null; description: string; performs_actions: boolean; cost_credits: number }): string {
  const where = r.site ?? (r.website_url ? r.website_url.replace(/^https?:\/\//, '').replace(/\/.*$/, '') : null);
  const head = where ? `${r.workflow} (${where}).` : `${r.workflow}.`;
  const body = r.description.trim().replace(/\s+/g, ' ');
  const action = r.performs_actions ? ' This changes something on the website; check the request status before repeating it.' : '';
  return `${head}${body ? ` ${body.endsWith('.') ? body : `${body}.`}` : ''}${action} ${costText(r.cost_credits)}`;
}

/** The cursor is the last operation id: MCP clients pass it unchecked, so it is checked here (a 20-digit number would fail the ::bigint cast). */
function toolsCursor(cursor: string | number): string {
  const text = String(cursor);
  if (!/^[0-9]{1,18}$/.test(text)) {
    throw new ServiceError('invalid_input', "cursor: must be the numeric next_cursor of the previous page", {
      param: 'cursor',
      details: { issues: [{ path: 'cursor', message: 'must be the numeric next_cursor of the previous page' }] },
    });
  }
  return text;
}

export async function listTools(db: Db, orgId: string, opts: ListToolsOptions): Promise<{ items: Tool[]; next_cursor: string | null }> {
  const limit = Math.min(Math.max(opts.limit ?? TOOLS_PAGE_SIZE, 1), TOOLS_PAGE_SIZE);
  const params: unknown[] = [orgId];
  const p = (v: unknown) => {
    params.push(v);
    return `$${params.length}`;
  };
  const where = [
    `a.status = 'active'`,
    `((a.visibility = 'public' AND a.availability = 'available') OR (a.visibility = 'private' AND a.owner_org_id = $1))`,
  ];
  if (opts.api) where.push(`a.handle = ${p(opts.api)}`);
  if (opts.apis) where.push(`a.handle = ANY(${p(opts.apis)}::text[])`);
  if (opts.operation_id !== undefined) where.push(`o.id = ${p(opts.operation_id)}`);
  if (opts.cursor !== undefined && opts.cursor !== '') where.push(`o.id > ${p(toolsCursor(opts.cursor))}::bigint`);
  if (opts.readOnly) where.push('NOT o.performs_actions');
  const words = queryWords(opts.query);
  for (const w of words) {
    // Every word must appear (or nearly) in the workflow's search document or the operation's text.
    const like = `%${w.replace(/[\\%_]/g, '\\$&')}%`;
    where.push(
      `(s.tsv @@ to_tsquery('english', ${p(`${w}:*`)}) OR s.document %> ${p(w)}
        OR o.name ILIKE ${p(like)} OR o.label ILIKE ${p(like)} OR o.description ILIKE ${p(like)})`,
    );
  }
  const r = await db.query(
    `SELECT o.id, o.name, o.label, o.description, o.cost_credits, o.performs_actions, o.default_version,
            a.handle, a.name AS workflow, a.visibility, a.website_url,
            (SELECT host FROM api_sites st WHERE st.api_id = a.id ORDER BY position LIMIT 1) AS site,
            v.input_schema, v.output_schema
       FROM operations o
       JOIN apis a ON a.id = o.api_id
       LEFT JOIN catalog_search s ON s.api_id = a.id
       JOIN operation_versions v ON v.operation_id = o.id AND v.version = o.default_version
      WHERE ${where.join(' AND ')}
      ORDER BY o.id
      LIMIT ${p(limit + 1)}`,
    params,
  );
  const rows = r.rows.slice(0, limit);
  const items: Tool[] = rows.map((x) => {
    const id = Number(x.id);
    const performs = x.performs_actions as boolean;
    return {
      name: toolName(id),
      title: `${x.workflow}: ${x.label}`,
      description: toolDescription({
        workflow: x.workflow,
        site: x.site,
        website_url: x.website_url,
        description: x.description,
        performs_actions: performs,
        cost_credits: x.cost_credits,
      }),
      inputSchema: x.input_schema,
      outputSchema: x.output_schema ?? null,
      annotations: {
        title: `${x.workflow}: ${x.label}`,
        readOnlyHint: !performs,
        destructiveHint: performs,
        idempotentHint: !performs,
        openWorldHint: true,
      },
      operation_id: id,
      api: x.handle,
      visibility: x.visibility,
      operation: x.name,
      contract_version: x.default_version,
      cost_credits: x.cost_credits,
      workflow: x.workflow,
      site: x.site ?? null,
      performs_actions: performs,
    };
  });
  const last = rows[rows.length - 1];
  return { items, next_cursor: r.rows.length > limit && last ? String(last.id) : null };
}
