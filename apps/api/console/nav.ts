// The console's navigation, in order. A new page module adds its link here (apps/api/console/README.md).
export interface NavItem {
  href: string;
  label: string;
  /** Shown only to Owners and Administrators (the pages themselves check the role too). */
  managersOnly?: boolean;
}

export const NAV: NavItem[] = [
  { href: '/console', label: 'Overview' },
  { href: '/console/requests', label: 'Requests' },
  { href: '/console/workflows', label: 'Workflows' },
  { href: '/console/keys', label: 'API keys', managersOnly: true },
  { href: '/console/connections', label: 'Connections', managersOnly: true },
  { href: '/console/members', label: 'Members', managersOnly: true },
  { href: '/console/mcp-clients', label: 'MCP clients', managersOnly: true },
];
