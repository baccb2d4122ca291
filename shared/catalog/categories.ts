// The 34 category IDs of the catalog, with their readable labels. Every API has exactly one.
// The search migration (shared/db/migrations/1700000000100_catalog_search.sql) seeds the same
// labels into `catalog_categories` so searches match them; test/catalog.test.ts keeps both equal.

export const CATEGORIES = [
  { id: 'ai', label: 'AI & machine learning' },
  { id: 'blockchain', label: 'Blockchain' },
  { id: 'commerce', label: 'Commerce & shopping' },
  { id: 'communication', label: 'Communication' },
  { id: 'data', label: 'Data' },
  { id: 'developer-tools', label: 'Developer tools' },
  { id: 'documents', label: 'Documents' },
  { id: 'education', label: 'Education' },
  { id: 'energy', label: 'Energy' },
  { id: 'entertainment', label: 'Entertainment' },
  { id: 'finance', label: 'Finance' },
  { id: 'food', label: 'Food & drink' },
  { id: 'government', label: 'Government' },
  { id: 'health', label: 'Health' },
  { id: 'identity', label: 'Identity' },
  { id: 'jobs', label: 'Jobs' },
  { id: 'legal', label: 'Legal' },
  { id: 'logistics', label: 'Logistics' },
  { id: 'maps', label: 'Maps' },
  { id: 'marketing', label: 'Marketing' },
  { id: 'media', label: 'Media' },
  { id: 'news', label: 'News' },
  { id: 'payments', label: 'Payments' },
  { id: 'productivity', label: 'Productivity' },
  { id: 'real-estate', label: 'Real estate' },
  { id: 'science', label: 'Science' },
  { id: 'search', label: 'Search' },
  { id: 'security', label: 'Security' },
  { id: 'social', label: 'Social' },
  { id: 'sports', label: 'Sports' },
  { id: 'storage', label: 'Storage' },
  { id: 'travel', label: 'Travel' },
  { id: 'weather', label: 'Weather' },
  { id: 'other', label: 'Other' },
] as const;

export type CategoryId = (typeof CATEGORIES)[number]['id'];

export const CATEGORY_IDS = CATEGORIES.map((c) => c.id) as unknown as readonly [CategoryId, ...CategoryId[]];

const LABELS = new Map<string, string>(CATEGORIES.map((c) => [c.id, c.label]));

export const isCategoryId = (id: string): id is CategoryId => LABELS.has(id);
export const categoryLabel = (id: string): string | undefined => LABELS.get(id);
