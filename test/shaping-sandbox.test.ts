// Shaping's own defense, inside Temporal's real workflow sandbox (a worker in this process, on a
// task queue of its own, against the stack's Temporal): shapeOutput fed hostile specs that never
// passed validation leaves Object.prototype untouched for every later workflow. A control shows
// that a write through the prototype would indeed be seen by later workflows on the same worker.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker, bundleWorkflowCode } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stack } from './helpers/stack.ts';
import type * as wf from './shaping-sandbox-workflows.ts';

const taskQueue = `shaping-sandbox-${Date.now()}-${Math.random().toString(36).slice(2, 6)}`;
let worker: Worker;
let running: Promise<void>;
let client: Client;
let nativeConnection: NativeConnection;
let connection: Connection;
let n = 0;

const opts = () => ({ taskQueue, workflowId: `${taskQueue}-${++n}`, workflowExecutionTimeout: '60 seconds' });
const probe = () => client.workflow.execute<typeof wf.probePrototype>('probePrototype', opts());
const pollute = (set: boolean) => client.workflow.execute<typeof wf.polluteOnPurpose>('polluteOnPurpose', { ...opts(), args: [set] });
const shape = (o: unknown, specs: unknown[]) => client.workflow.execute<typeof wf.shapeUnvalidated>('shapeUnvalidated', { ...opts(), args: [o, specs] });

beforeAll(async () => {
  const workflowsPath = path.resolve(path.dirname(fileURLToPath(import.meta.url)), 'shaping-sandbox-workflows.ts');
  const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: console.error };
  const workflowBundle = await bundleWorkflowCode({ workflowsPath, logger: quiet });
  nativeConnection = await NativeConnection.connect({ address: stack().temporalAddress });
  // One worker: its workflows share one reused V8 context, as the service's worker's do.
  worker = await Worker.create({ connection: nativeConnection, taskQueue, workflowBundle });
  running = worker.run();
  connection = await Connection.connect({ address: stack().temporalAddress });
  client = new Client({ connection });
}, 180_000);
afterAll(async () => {
  worker?.shutdown();
  await running;
  await connection?.close();
  await nativeConnection?.close();
});

const output = { city: 'London', country: 'GB', nested: { a: 1 }, list: [1, 2, 3] };
const hostileSpecs = [
  { schema: {}, mapping: [{ target: '/__proto__/response/include', source: '/city' }] },
  { schema: {}, mapping: [{ target: '/constructor/prototype/x', source: '/city' }] },
  { schema: {}, mapping: [{ target: '/__proto__/polluted', source: '/city' }] },
  { schema: {}, mapping: [{ target: '__proto__', source: '/city' }, { target: '/x/100000000', source: '/city' }] },
  { include: ['__proto__.polluted', 'constructor.prototype.x'] },
  { exclude: ['__proto__'] },
  { schema: JSON.parse('{"properties":{"__proto__":{"properties":{"polluted":{}}}}}') },
  { schema: {}, mapping: [{ target: '/ok', source: '/city' }, { target: '/ok/__proto__/x', source: '/country' }] },
];

describe('shapeOutput in the real workflow sandbox', () => {
  it('the control: a prototype write in one workflow is seen by the next on the same worker', async () => {
    await pollute(true);
    const seen = await probe();
    await pollute(false);
    expect(seen.seen.canary).toBe('visible to every later workflow');
    expect((await probe()).seen.canary).toBeUndefined();
  });

  it('hostile, unvalidated specs shape without throwing and leave Object.prototype as it was', async () => {
    const before = await probe();
    const { results, protoKeys } = await shape(output, hostileSpecs);
    expect(protoKeys).toEqual(before.protoKeys);
    expect(results).toEqual([{}, {}, {}, {}, {}, { city: 'London', country: 'GB', nested: { a: 1 }, list: [1, 2, 3] }, {}, { ok: 'London' }]);
    const after = await probe();
    expect(after.protoKeys).toEqual(before.protoKeys);
    expect(after.seen).toEqual({});
  });
});
