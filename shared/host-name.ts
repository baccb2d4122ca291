/**
 * A host name as sites are named (a definition's sites and access requirements, connections): DNS
 * labels of 1 to 63 lower-case letters, digits and inner hyphens, dot-separated, no port. No
 * lookahead (RE2 has none): the 253-character bound is each user's to add.
 */
export const HOST_NAME_PATTERN = '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$';
