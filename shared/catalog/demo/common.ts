// Helpers shared by the demo catalog's definitions.
import { demoSiteIcons } from '../../../apps/demo-sites/icons.ts';
import type { SiteDefinition } from '../types.ts';

/** A demo site with the icon the demo sites serve at /favicon.svg. */
export function site(name: string, host: string): SiteDefinition {
  const icon = demoSiteIcons[host];
  return icon ? { name, host, icon: { content_type: icon.content_type, bytes: icon.bytes } } : { name, host };
}

/** ISO 8601 calendar date. */
export const DATE = { type: 'string', format: 'date' } as const;
/** ISO 8601 date-time. */
export const DATETIME = { type: 'string', format: 'date-time' } as const;
