// Workflow histories to and from the JSON form other Temporal tools write (`temporal workflow show
// --output json`): the form of the recorded files in test/histories.
//
// Why not @temporalio/common's historyToJSON / historyFromJSON: in this install @temporalio/common
// and @temporalio/proto each carry their own copy of protobufjs, and protojson from common's copy
// rejects the History type built by proto's copy ("type must be a Type"). The Worker's replay calls
// historyFromJSON on any history whose event ids are strings, so the replay test hands it decoded
// messages instead. protojson is loaded here from the protobufjs that @temporalio/proto uses, so the
// two always match, deduplicated install or not.
import { createRequire } from 'node:module';
import type { temporal } from '@temporalio/proto';

type History = temporal.api.history.v1.IHistory;

interface ProtoJson {
  toJson(type: unknown, message: unknown): unknown;
  fromJson(type: unknown, json: unknown, options?: { ignoreUnknownFields?: boolean }): unknown;
}

// Loaded with require: the package is CommonJS whose named exports Node's ESM loader cannot see.
const requireHere = createRequire(import.meta.url);
const proto = requireHere('@temporalio/proto') as typeof import('@temporalio/proto');
// Its declaration returns the module's own type, which omits the reflection root's lookupType.
const { patchProtobufRoot } = requireHere('@temporalio/proto/lib/patch-protobuf-root') as { patchProtobufRoot(root: unknown): { lookupType(name: string): unknown } };
const protojson = createRequire(requireHere.resolve('@temporalio/proto'))('protobufjs/ext/protojson') as ProtoJson;
const historyType = patchProtobufRoot(proto).lookupType('temporal.api.history.v1.History');

/** A fetched history as canonical proto3 JSON (event ids as strings, enums by name, payloads base64). */
export function historyToJson(history: History): unknown {
  return protojson.toJson(historyType, proto.temporal.api.history.v1.History.fromObject(history));
}

/** A decoded History from its JSON form, ready for Worker.runReplayHistories. */
export function historyFromJson(json: unknown): temporal.api.history.v1.History {
  // Unknown fields (a newer server's) are tolerated, as the SDK's own reader does.
  return protojson.fromJson(historyType, json, { ignoreUnknownFields: true }) as temporal.api.history.v1.History;
}

/** The workflow type a history ran: from its first event (WorkflowExecutionStarted). */
export function workflowTypeOf(history: History): string | undefined {
  return history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name ?? undefined;
}
