// The organization's tool definitions for the MCP server: exactly GET /v1/catalog/tools's list
// (shared/db/catalog-tools.ts), read through all its pages.
import { listTools } from '../../../shared/db/catalog-tools.ts';
import type { Db } from '../../../shared/db/pool.ts';
import type { Tool } from '../../../shared/schemas/tools.ts';

export interface ToolFilter {
  api?: string;
  apis?: string[];
  query?: string;
  readOnly?: boolean;
}

/** Bound on pages read for one answer (100 tools each); an organization with more is cut here. */
const MAX_PAGES = 50;

/** The tools page by page, in the list's order (operation id), at most MAX_PAGES pages: a reader stops when it has enough. */
export async function* orgToolPages(db: Db, baseUrl: string, orgId: string, filter: ToolFilter = {}): AsyncGenerator<Tool[]> {
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const { items, next_cursor } = await listTools(db, orgId, { api: filter.api, apis: filter.apis, query: filter.query, readOnly: filter.readOnly, cursor, baseUrl });
    yield items;
    if (!next_cursor) return;
    cursor = next_cursor;
  }
}

/** Every tool of the filter (one workflow's, with `api`: a handful). */
export async function listOrgTools(db: Db, baseUrl: string, orgId: string, filter: ToolFilter = {}): Promise<Tool[]> {
  const all: Tool[] = [];
  for await (const items of orgToolPages(db, baseUrl, orgId, filter)) all.push(...items);
  return all;
}
