// The console's page modules, registered in this order. A page module is
// `(app, ctx) => Promise<void>` that declares its routes under /console (README.md).
import type { FastifyInstance } from 'fastify';
import type { ConsoleContext } from '../context.ts';
import authPages from './auth.ts';
import overviewPage from './overview.ts';
import requestPages from './requests.ts';
import keyPages from './keys.ts';
import connectionPages from './connections.ts';
import memberPages from './members.ts';
import workflowPages from './workflows.ts';
import workflowBuildPages from './workflow-build.ts';
import oauthPages from './oauth.ts';
import invitationPages from './invitations.ts';

export type PageModule = (app: FastifyInstance, ctx: ConsoleContext) => Promise<void>;

export const PAGES: PageModule[] = [authPages, overviewPage, requestPages, keyPages, connectionPages, memberPages, workflowPages, workflowBuildPages, oauthPages, invitationPages];
