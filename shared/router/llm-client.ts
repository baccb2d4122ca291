// One forced tool call to an OpenAI-compatible chat-completions endpoint, bounded in time and size.
// Plain fetch with a zod-checked answer (no client library is installed). Every failure becomes an
// LlmError with a reason code only: the endpoint's own words, its URL and the key never travel on.
import { z } from 'zod';

export interface LlmSettings {
  baseUrl: string;
  apiKey?: string;
  model: string;
  timeoutMs: number;
  maxResponseBytes: number;
}

/** Why the LLM did not answer; recorded in the request's routing as `llm_fallback` (and in the OpenAPI). */
export const LLM_FALLBACKS = [
  'error', // the endpoint could not be reached or answered a non-2xx status
  'timeout', // no complete answer within OPENAI_TIMEOUT_MS
  'invalid_response', // not the OpenAI shape, arguments that are not a JSON object, or over OPENAI_MAX_RESPONSE_BYTES
  'refused', // no call of the named function, a refusal, or "none" of the candidates
  'unknown_operation', // a name that is not one of the in-scope candidates (or one withdrawn since)
  'action_not_asked', // an action the offline explicit-ask rule did not choose, another operation in place of the one it chose, or a prompt it refused as asking for an action
  'invalid_input', // the filled input fails the operation's schema
  'input_missing', // its operation lacks a required value while the offline router had chosen another
] as const;
export type LlmFallback = (typeof LLM_FALLBACKS)[number];

export class LlmError extends Error {
  constructor(readonly reason: LlmFallback) {
    super(`llm: ${reason}`);
  }
}

export interface ToolCallRequest {
  messages: { role: 'system' | 'user'; content: string }[];
  tool: { name: string; description: string; parameters: Record<string, unknown> };
  maxTokens: number;
}

const Answer = z.object({
  choices: z
    .array(
      z.object({
        message: z.object({
          refusal: z.string().nullish(),
          tool_calls: z
            .array(z.object({ type: z.literal('function').optional(), function: z.object({ name: z.string(), arguments: z.string() }) }))
            .nullish(),
        }),
      }),
    )
    .min(1),
});

const Arguments = z.record(z.string(), z.unknown());

/** The body, read up to `max` bytes; beyond, the read stops (the connection is dropped). */
async function boundedText(res: Response, max: number): Promise<string> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => undefined);
      throw new LlmError('invalid_response');
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

const isTimeout = (err: unknown) => err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError');

/** The arguments of the forced call, parsed: a JSON object, or an LlmError. */
export async function forcedToolCall(s: LlmSettings, req: ToolCallRequest): Promise<Record<string, unknown>> {
  const body = {
    model: s.model,
    messages: req.messages,
    tools: [{ type: 'function', function: req.tool }],
    tool_choice: { type: 'function', function: { name: req.tool.name } },
    temperature: 0,
    max_tokens: req.maxTokens,
  };
  const signal = AbortSignal.timeout(s.timeoutMs);
  let text: string;
  try {
    const res = await fetch(`${s.baseUrl.replace(/\/+$/, '')}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...(s.apiKey ? { authorization: `Bearer ${s.apiKey}` } : {}) },
      body: JSON.stringify(body),
      // A redirect could carry the key elsewhere: refused.
      redirect: 'error',
      signal,
    });
    if (!res.ok) {
      await res.body?.cancel().catch(() => undefined);
      throw new LlmError('error');
    }
    text = await boundedText(res, s.maxResponseBytes);
  } catch (err) {
    if (err instanceof LlmError) throw err;
    throw new LlmError(signal.aborted || isTimeout(err) ? 'timeout' : 'error');
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new LlmError('invalid_response');
  }
  const answer = Answer.safeParse(json);
  if (!answer.success) throw new LlmError('invalid_response');
  const message = answer.data.choices[0].message;
  const call = (message.tool_calls ?? []).find((c) => c.function.name === req.tool.name);
  if (!call || message.refusal) throw new LlmError('refused');
  let args: unknown;
  try {
    args = JSON.parse(call.function.arguments);
  } catch {
    throw new LlmError('invalid_response');
  }
  const object = Arguments.safeParse(args);
  if (!object.success) throw new LlmError('invalid_response');
  return object.data;
}
