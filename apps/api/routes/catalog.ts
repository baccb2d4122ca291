// Public catalog: list and detail. (Search, filters and the other catalog routes grow here.)
import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../../../shared/errors.ts';
import { HANDLE_PATTERN } from '../../../shared/schemas/common.ts';
import { selectableFields } from '../../../shared/format/shape.ts';

const iconUrl = (base: string, sha: string | null) => (sha ? `${base}/v1/icons/${sha}` : null);

export default async function catalogRoutes(app: FastifyInstance) {
  async function loadApis(where: string, params: unknown[]) {
    const base = app.baseUrl();
    const apis = await app.db.query(
      `SELECT a.* FROM apis a WHERE a.visibility = 'public' AND a.status = 'active' ${where} ORDER BY a.handle`,
      params,
    );
    if (apis.rowCount === 0) return [];
    const ids = apis.rows.map((a) => a.id);
    const sites = await app.db.query('SELECT * FROM api_sites WHERE api_id = ANY($1) ORDER BY api_id, position', [ids]);
    const ops = await app.db.query('SELECT * FROM operations WHERE api_id = ANY($1) ORDER BY api_id, id', [ids]);
    return apis.rows.map((a) => {
      const s = sites.rows.filter((x) => x.api_id === a.id).map((x) => ({ name: x.name, host: x.host, icon_url: iconUrl(base, x.icon_sha256) }));
      const o = ops.rows.filter((x) => x.api_id === a.id);
      const kinds = new Set(o.map((x) => ((x.access as unknown[]).length > 0 ? 'own' : 'open')));
      return {
        row: a,
        ops: o,
        item: {
          api: a.handle,
          name: a.name,
          description: a.description,
          category: a.category,
          website_url: a.website_url,
          logo_url: iconUrl(base, a.logo_sha256),
          availability: a.availability,
          visibility: 'public' as const,
          access: kinds.size > 1 ? 'mixed' : kinds.has('own') ? 'own' : 'open',
          is_enabled: true as const,
          sites: s,
          operations: o.map((x) => ({
            id: Number(x.id),
            operation: x.name,
            label: x.label,
            contract_version: x.default_version,
            cost_credits: x.cost_credits,
            performs_actions: x.performs_actions,
            health: { status: x.health_status, verified_at: x.verified_at ? (x.verified_at as Date).toISOString() : null },
            sites: s,
            access: x.access,
          })),
        },
      };
    });
  }

  app.get('/v1/catalog', async () => {
    const items = await loadApis('', []);
    return { success: true, data: { items: items.map((i) => i.item), next_cursor: null } };
  });

  app.get<{ Querystring: { api?: string } }>('/v1/catalog/detail', async (request) => {
    const handle = request.query.api;
    if (!handle) throw new ServiceError('invalid_input', 'api is required', { param: 'api', details: { issues: [{ path: 'api', message: 'required' }] } });
    if (!HANDLE_PATTERN.test(handle)) throw new ServiceError('invalid_input', 'api must be a handle like @name', { param: 'api', details: { issues: [{ path: 'api', message: 'invalid handle' }] } });
    const [found] = await loadApis('AND a.handle = $1', [handle]);
    if (!found) throw new ServiceError('unknown_api_slug', `No public workflow ${handle}`, { param: 'api' });
    const versions = await app.db.query(
      `SELECT v.* FROM operation_versions v JOIN operations o ON o.id = v.operation_id AND v.version = o.default_version WHERE o.api_id = $1`,
      [found.row.id],
    );
    const operations = found.item.operations.map((op) => {
      const v = versions.rows.find((x) => Number(x.operation_id) === op.id);
      const dbOp = found.ops.find((x) => Number(x.id) === op.id);
      return {
        ...op,
        operation_id: op.id,
        description: dbOp?.description ?? '',
        input_schema: v?.input_schema ?? null,
        output_schema: v?.output_schema ?? null,
        examples: v?.examples ?? [],
        selectable_fields: v ? selectableFields(v.output_schema) : [],
      };
    });
    return { success: true, data: { ...found.item, operations } };
  });
}
