// What the Workflows pages say when the builder refuses: the catalog's ServiceErrors from publish and
// restore, as a sentence a person can act on (and the status the page answers with).
import { PRIVATE_BUILD_CREDITS } from '../../../../shared/builder/index.ts';
import type { ServiceError } from '../../../../shared/errors.ts';

export const HANDLE_RE = /^@[a-z0-9][a-z0-9_-]{0,99}$/;

interface Shown {
  status: number;
  message: string;
  issues: Array<{ path: string; message: string }>;
}

const REASONS: Record<string, string> = {
  test_run_required: 'Not published: this exact definition has no passing test run yet. Run the test, then publish the same text.',
  handle_taken: 'Not published: another organization already shares a workflow with this handle in the public catalog. Choose another handle, or keep it private.',
  already_shared: 'Not published: this workflow is shared in the public catalog, and a shared workflow cannot be made private again. Turn sharing back on to publish an update.',
  connections_leave_site: "Not shared: a shared workflow runs with its callers' connections, so its recipe may reach only the sites of its access requirements (the problems are listed).",
};

/** The message for a refusal the page shows in place; null for an error that is not the caller's to fix. */
export function refusalMessage(err: ServiceError): Shown | null {
  const details = (err.details ?? {}) as { reason?: string; issues?: Array<{ path: string; message: string }>; available_credits?: number };
  const issues = Array.isArray(details.issues) ? details.issues : [];
  switch (err.code) {
    case 'insufficient_credits':
      return {
        status: 402,
        message: `Not published: a private version costs ${PRIVATE_BUILD_CREDITS} credits and your organization has ${details.available_credits ?? 'fewer'} available. Nothing was charged.`,
        issues: [],
      };
    case 'publish_refused':
      return { status: 409, message: REASONS[details.reason ?? ''] ?? `Not published: ${err.message}.`, issues };
    case 'invalid_input':
      return { status: 400, message: 'Not published: the definition has problems (listed).', issues };
    case 'workflow_version_unavailable':
      return { status: 409, message: 'That version does not exist (any more).', issues: [] };
    default:
      return null;
  }
}
