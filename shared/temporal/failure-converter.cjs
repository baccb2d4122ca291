// The failure converter of every Temporal client and worker the service creates and of the workflow
// bundle (data-converter.ts, apps/worker/worker.ts). A failure's message and stack trace are not
// payloads: by default they are stored in the history as plain text, and the payload codec never
// sees them. They carry what a payload would: a website failure names the page it asked for
// (`The website returned 500 for host/jobs/<input>`), a recipe's not_found/fail step renders its
// message from the query's scope, and a stack trace names the worker's source files. With
// encodeCommonAttributes both move into the failure's encoded attributes, a payload, which the
// codec encrypts; the history keeps "Encoded failure". Decoding restores them on every side (the
// workflow's catalog codes and messages are unchanged), and histories from before still decode.
//
// CommonJS and plain JavaScript: the SDK loads it with require() (clients and workers, also under
// vitest, which has no TypeScript require hook) and webpack bundles it into the workflow code.
'use strict';
const { DefaultFailureConverter } = require('@temporalio/common');

exports.failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });
