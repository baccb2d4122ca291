// The shape in which workflows are defined before they are published into PostgreSQL.
// The demo catalog (shared/catalog/demo/) is written in this shape; the seed publishes it.
// A published operation version is immutable: its schemas, examples and recipe never change.

export type JsonSchema = Record<string, unknown>;

export interface VerifiedExample {
  title?: string;
  input: Record<string, unknown>;
  /** What running `input` returns; tests run the example and compare. */
  output: unknown;
}

/** What an operation needs from the calling organization before it can run. */
export interface AccessRequirement {
  /** `account` (a signed-in session on the site) or `access_key` (a key or variable). */
  kind: 'account' | 'access_key';
  /** Stable name of the connection, e.g. `shop_account`, `WEATHER_API_KEY`. */
  name: string;
  /** Host of the site the connection is for. */
  site: string;
}

export interface OperationVersionDefinition {
  version: number;
  input_schema: JsonSchema;
  output_schema: JsonSchema;
  examples: VerifiedExample[];
  /** Declarative recipe; validated by shared/recipes/schema.ts when published. */
  recipe: unknown;
  /** false once a version is withdrawn; pinning it then gives workflow_version_unavailable. */
  available?: boolean;
}

export interface OperationDefinition {
  /** Callable name, `^[a-z][a-z0-9_]{0,99}$`. */
  name: string;
  label: string;
  description: string;
  cost_credits: number;
  performs_actions?: boolean;
  /** Contract version used when a caller does not pin one. Does not move on publish. */
  default_version: number;
  versions: OperationVersionDefinition[];
  access?: AccessRequirement[];
  /** Extra search terms the operation is known for. */
  labels?: string[];
}

export interface SiteDefinition {
  name: string;
  host: string;
  /** Icon file bytes; stored by SHA-256 and served at /v1/icons/{sha256}. */
  icon?: { content_type: string; bytes: Uint8Array };
}

export interface ApiDefinition {
  /** Handle including `@`, `^@[a-z0-9][a-z0-9_-]{0,99}$`. */
  handle: string;
  name: string;
  description: string;
  /** One of the 34 category ids. */
  category: string;
  website_url: string | null;
  /** The sites read, the product's own first. The first site's icon is the logo. */
  sites: SiteDefinition[];
  operations: OperationDefinition[];
  visibility?: 'public' | 'private';
  availability?: 'available' | 'coming_soon';
}
