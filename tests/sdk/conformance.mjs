// Points an official provider SDK at the fake provider and checks that the
// SDK parsed what the script (scripts/SUITE.json) meant: text, tool calls,
// stop reasons and usage in that provider's own reporting convention.
// The expected numbers are written out by hand, not computed the way the
// server computes them, so a wrong conversion in the server fails here.
//
// Usage: node conformance.mjs anthropic|openai-chat|openai-responses|gemini
// Needs FAKE_URL, FAKE_LOG and the fake API keys in the environment (the
// bats helper fake_start sets them), with the fake serving scripts/SUITE.json.
// Prints "ok - NAME" or "not ok - NAME: why" per check; exits 1 on a failure.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

const suite = process.argv[2];
const FAKE_URL = process.env.FAKE_URL;
if (!FAKE_URL) {
  console.error('conformance: FAKE_URL is not set (start the fake provider first)');
  process.exit(2);
}

let passed = 0;
let failed = 0;
async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok - ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok - ${name}: ${(e && e.stack) || e}`);
  }
}

// The fake's request log: one JSON object per request.
function requests() {
  return readFileSync(process.env.FAKE_LOG, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
}
function lastRequest() {
  const r = requests();
  return r[r.length - 1];
}

async function expectThrow(fn, test) {
  let threw = null;
  try {
    await fn();
  } catch (e) {
    threw = e;
  }
  assert.ok(threw, 'expected the SDK to throw');
  test(threw);
}

const tools = {
  lookup: { description: 'Look an order up', parameters: { type: 'object', properties: { order: { type: 'integer' } }, required: ['order'] } },
};

// ------------------------------------------------------------------ Anthropic
async function anthropic() {
  const { default: Anthropic } = await import('@anthropic-ai/sdk');
  const client = new Anthropic({ baseURL: FAKE_URL, apiKey: process.env.ANTHROPIC_API_KEY, maxRetries: 0 });
  const tool = { name: 'lookup', description: tools.lookup.description, input_schema: tools.lookup.parameters };
  const messages = [{ role: 'user', content: 'Where is order 1042?' }];
  let first;

  await check('messages.create parses text, tool_use and usage (cache split by TTL)', async () => {
    first = await client.messages.create({ model: 'claude-test', max_tokens: 256, messages, tools: [tool] });
    assert.equal(first.type, 'message');
    assert.equal(first.role, 'assistant');
    assert.equal(first.model, 'claude-test');
    assert.equal(first.stop_reason, 'tool_use');
    assert.equal(first.content.length, 2);
    assert.deepEqual(first.content[0], { type: 'text', text: 'Let me look that up.' });
    assert.equal(first.content[1].type, 'tool_use');
    assert.equal(first.content[1].id, 'toolu_01');
    assert.equal(first.content[1].name, 'lookup');
    assert.deepEqual(first.content[1].input, { order: 1042 });
    assert.equal(first.usage.input_tokens, 12);
    assert.equal(first.usage.cache_read_input_tokens, 1000);
    assert.equal(first.usage.cache_creation_input_tokens, 250);
    assert.deepEqual(first.usage.cache_creation, { ephemeral_5m_input_tokens: 200, ephemeral_1h_input_tokens: 50 });
    assert.equal(first.usage.output_tokens, 30);
    const req = lastRequest();
    assert.equal(req.path, '/v1/messages');
    const key = req.headers['x-api-key'] || (req.headers.authorization || '').replace(/^Bearer /, '');
    assert.equal(key, process.env.ANTHROPIC_API_KEY, 'the key went out as x-api-key or a bearer token');
    assert.ok(req.headers['anthropic-version'], 'SDK sends anthropic-version');
  });

  await check('tool round: tool_result goes out, final text comes back', async () => {
    const second = await client.messages.create({
      model: 'claude-test', max_tokens: 256, tools: [tool],
      messages: [...messages, { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01', content: '{"status":"shipped"}' }] }],
    });
    assert.equal(second.stop_reason, 'end_turn');
    assert.equal(second.content[0].text, 'Order 1042 has shipped.');
    assert.equal(second.usage.input_tokens, 40);
    assert.equal(second.usage.cache_read_input_tokens, 1250);
    assert.equal(second.usage.cache_creation_input_tokens, 0);
    const sent = lastRequest().body.messages[2].content[0];
    assert.equal(sent.type, 'tool_result');
    assert.equal(sent.tool_use_id, 'toolu_01');
  });

  let streamed;
  await check('messages.stream: thinking, text and input_json_delta assemble; message_delta usage is cumulative', async () => {
    const stream = client.messages.stream({ model: 'claude-test', max_tokens: 1024, messages, tools: [tool],
      thinking: { type: 'enabled', budget_tokens: 512 } });
    let text = '';
    let thinking = '';
    const jsonParts = [];
    stream.on('text', (t) => { text += t; });
    stream.on('thinking', (t) => { thinking += t; });
    stream.on('inputJson', (delta) => { jsonParts.push(delta); });
    streamed = await stream.finalMessage();
    assert.equal(text, 'Checking order 1042.');
    assert.equal(thinking, 'The user wants the order status.');
    assert.ok(jsonParts.length > 1, 'tool input arrived in several fragments');
    assert.deepEqual(streamed.content.map((b) => b.type), ['thinking', 'text', 'tool_use']);
    assert.ok(streamed.content[0].signature, 'thinking block got its signature');
    assert.equal(streamed.content[2].id, 'toolu_02');
    assert.deepEqual(streamed.content[2].input, { order: 1042, fields: ['status', 'eta'] });
    assert.equal(streamed.stop_reason, 'tool_use');
    assert.equal(streamed.usage.input_tokens, 15);
    assert.equal(streamed.usage.cache_read_input_tokens, 800);
    assert.equal(streamed.usage.cache_creation_input_tokens, 100);
    assert.equal(streamed.usage.output_tokens, 64, 'final output_tokens is the cumulative one, not a sum');
    assert.equal(lastRequest().body.stream, true);
  });

  await check('messages.stream tool round answers the tool result', async () => {
    const final = await client.messages.stream({
      model: 'claude-test', max_tokens: 256, tools: [tool],
      messages: [...messages, { role: 'assistant', content: streamed.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_02', content: 'tomorrow' }] }],
    }).finalMessage();
    assert.equal(final.content[0].text, 'It ships tomorrow.');
    assert.equal(final.usage.output_tokens, 6);
    assert.equal(final.usage.cache_read_input_tokens, 900);
  });

  await check('raw stream split into 3-byte writes with CRLF line ends parses', async () => {
    const s = await client.messages.create({ model: 'claude-test', max_tokens: 64, messages, stream: true });
    const types = [];
    let text = '';
    let outTokens = null;
    for await (const ev of s) {
      types.push(ev.type);
      if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
      if (ev.type === 'message_delta') outTokens = ev.usage.output_tokens;
    }
    assert.equal(text, 'Split across writes, with CRLF line ends.');
    assert.equal(types[0], 'message_start');
    assert.equal(types[types.length - 1], 'message_stop');
    assert.ok(types.includes('content_block_start') && types.includes('content_block_stop'));
    assert.equal(outTokens, 11);
  });

  await check('429 with retry-after: the SDK retries and then succeeds', async () => {
    const retrying = new Anthropic({ baseURL: FAKE_URL, apiKey: process.env.ANTHROPIC_API_KEY, maxRetries: 1 });
    const before = requests().length;
    const msg = await retrying.messages.create({ model: 'claude-test', max_tokens: 64, messages });
    assert.equal(msg.content[0].text, 'After one retry.');
    assert.equal(requests().length - before, 2, 'one 429 then one success');
  });

  await check('mid-stream error event surfaces as an overloaded_error', async () => {
    await expectThrow(async () => {
      const s = await client.messages.create({ model: 'claude-test', max_tokens: 64, messages, stream: true });
      for await (const _ of s) { /* drain */ }
    }, (e) => {
      assert.match(String(e.message), /overloaded_error/);
    });
  });

  await check('max_tokens stop reason', async () => {
    const m = await client.messages.create({ model: 'claude-test', max_tokens: 2, messages });
    assert.equal(m.stop_reason, 'max_tokens');
    assert.equal(m.content[0].text, 'Cut off');
  });
}

// ------------------------------------------------------- OpenAI chat
async function openaiChat() {
  const { default: OpenAI } = await import('openai');
  const client = new OpenAI({ baseURL: `${FAKE_URL}/v1`, apiKey: process.env.OPENAI_API_KEY, maxRetries: 0 });
  const fn = [{ type: 'function', function: { name: 'lookup', ...tools.lookup } }];
  const messages = [{ role: 'user', content: 'Where is order 1042?' }];
  let first;

  await check('chat.completions.create: tool call, finish_reason, prompt_tokens INCLUDES cached', async () => {
    first = await client.chat.completions.create({ model: 'gpt-test', messages, tools: fn });
    assert.equal(first.object, 'chat.completion');
    const c = first.choices[0];
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.message.content, null);
    assert.equal(c.message.tool_calls.length, 1);
    assert.equal(c.message.tool_calls[0].id, 'call_1');
    assert.equal(c.message.tool_calls[0].function.name, 'lookup');
    assert.deepEqual(JSON.parse(c.message.tool_calls[0].function.arguments), { order: 1042 });
    assert.equal(first.usage.prompt_tokens, 1100);
    assert.equal(first.usage.prompt_tokens_details.cached_tokens, 1000);
    assert.equal(first.usage.completion_tokens, 50, 'completion_tokens includes reasoning');
    assert.equal(first.usage.completion_tokens_details.reasoning_tokens, 32);
    assert.equal(first.usage.total_tokens, 1150);
    const req = lastRequest();
    assert.equal(req.path, '/v1/chat/completions');
    assert.equal(req.headers.authorization, `Bearer ${process.env.OPENAI_API_KEY}`);
  });

  await check('tool round via the stream helper; include_usage gives the final usage chunk', async () => {
    const stream = client.chat.completions.stream({
      model: 'gpt-test', tools: fn, stream_options: { include_usage: true },
      messages: [...messages, first.choices[0].message, { role: 'tool', tool_call_id: 'call_1', content: 'shipped' }],
    });
    let text = '';
    stream.on('content', (d) => { text += d; });
    const done = await stream.finalChatCompletion();
    assert.equal(text, 'Order 1042 has shipped.');
    assert.equal(done.choices[0].message.content, 'Order 1042 has shipped.');
    assert.equal(done.choices[0].finish_reason, 'stop');
    assert.equal(done.usage.prompt_tokens, 1164);
    assert.equal(done.usage.prompt_tokens_details.cached_tokens, 1024);
    assert.equal(done.usage.completion_tokens, 7);
    const sent = lastRequest().body;
    assert.equal(sent.messages[2].role, 'tool');
    assert.equal(sent.messages[2].tool_call_id, 'call_1');
  });

  await check('raw stream: two tool calls assemble from index/id/name/arguments fragments', async () => {
    const s = await client.chat.completions.create({ model: 'gpt-test', messages, tools: fn, stream: true,
      stream_options: { include_usage: true } });
    const calls = [];
    let text = '';
    let finish = null;
    let usage = null;
    let usageChunkChoices = null;
    for await (const chunk of s) {
      if (chunk.usage) { usage = chunk.usage; usageChunkChoices = chunk.choices.length; }
      for (const ch of chunk.choices) {
        if (ch.delta.content) text += ch.delta.content;
        for (const tc of ch.delta.tool_calls || []) {
          calls[tc.index] ??= { id: '', name: '', args: '' };
          if (tc.id) calls[tc.index].id = tc.id;
          if (tc.function?.name) calls[tc.index].name += tc.function.name;
          if (tc.function?.arguments) calls[tc.index].args += tc.function.arguments;
        }
        if (ch.finish_reason) finish = ch.finish_reason;
      }
    }
    assert.equal(text, 'Two lookups.');
    assert.equal(finish, 'tool_calls');
    assert.equal(calls.length, 2);
    assert.deepEqual([calls[0].id, calls[0].name], ['call_a', 'lookup']);
    assert.deepEqual([calls[1].id, calls[1].name], ['call_b', 'weather']);
    assert.deepEqual(JSON.parse(calls[0].args), { order: 1 });
    assert.deepEqual(JSON.parse(calls[1].args), { city: 'Zürich', days: [1, 2] });
    assert.equal(usageChunkChoices, 0, 'usage chunk has empty choices');
    assert.equal(usage.completion_tokens_details.reasoning_tokens, 10);
    assert.equal(usage.completion_tokens, 40);
  });

  await check('stream without stream_options.include_usage carries no usage', async () => {
    const s = await client.chat.completions.create({ model: 'gpt-test', messages, stream: true });
    let text = '';
    let sawUsage = false;
    for await (const chunk of s) {
      if (chunk.usage) sawUsage = true;
      for (const ch of chunk.choices) text += ch.delta.content || '';
    }
    assert.equal(text, 'No usage asked for.');
    assert.equal(sawUsage, false);
  });

  await check('stream split into 5-byte writes with CRLF parses', async () => {
    const s = await client.chat.completions.create({ model: 'gpt-test', messages, stream: true,
      stream_options: { include_usage: true } });
    let text = '';
    let usage = null;
    for await (const chunk of s) {
      if (chunk.usage) usage = chunk.usage;
      for (const ch of chunk.choices) text += ch.delta.content || '';
    }
    assert.equal(text, 'Split and CRLF stream.');
    assert.equal(usage.prompt_tokens, 9);
  });

  await check('mid-stream {"error":...} chunk throws', async () => {
    await expectThrow(async () => {
      const s = await client.chat.completions.create({ model: 'gpt-test', messages, stream: true });
      for await (const _ of s) { /* drain */ }
    }, (e) => assert.match(String(e.message), /server had an error/));
  });

  await check('max_tokens maps to finish_reason length', async () => {
    const r = await client.chat.completions.create({ model: 'gpt-test', messages });
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.choices[0].message.content, 'Cut off');
  });
}

// --------------------------------------------------- OpenAI Responses
async function openaiResponses() {
  const { default: OpenAI } = await import('openai');
  const client = new OpenAI({ baseURL: `${FAKE_URL}/v1`, apiKey: process.env.OPENAI_API_KEY, maxRetries: 0 });
  const fn = [{ type: 'function', name: 'lookup', strict: false, ...tools.lookup }];
  let first;

  await check('responses.create: output_text, function_call, input_tokens INCLUDES cached', async () => {
    first = await client.responses.create({ model: 'gpt-test', input: 'Where is order 1042?', tools: fn });
    assert.equal(first.object, 'response');
    assert.equal(first.status, 'completed');
    assert.equal(first.output_text, 'Let me look that up.');
    const call = first.output.find((o) => o.type === 'function_call');
    assert.equal(call.call_id, 'call_r1');
    assert.equal(call.name, 'lookup');
    assert.deepEqual(JSON.parse(call.arguments), { order: 1042 });
    assert.equal(first.usage.input_tokens, 2000);
    assert.equal(first.usage.input_tokens_details.cached_tokens, 1800);
    assert.equal(first.usage.output_tokens, 70);
    assert.equal(first.usage.output_tokens_details.reasoning_tokens, 50);
    assert.equal(first.usage.total_tokens, 2070);
    assert.equal(lastRequest().path, '/v1/responses');
  });

  await check('responses.stream tool round: reasoning summary, text deltas, completed usage', async () => {
    const stream = client.responses.stream({
      model: 'gpt-test', tools: fn, reasoning: { effort: 'low', summary: 'auto' },
      input: [{ role: 'user', content: 'Where is order 1042?' }, ...first.output,
        { type: 'function_call_output', call_id: 'call_r1', output: 'shipped' }],
    });
    let text = '';
    let summary = '';
    const types = new Set();
    for await (const ev of stream) {
      types.add(ev.type);
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.reasoning_summary_text.delta') summary += ev.delta;
    }
    const done = await stream.finalResponse();
    assert.equal(text, 'Order 1042 has shipped.');
    assert.equal(summary, 'Summarising the order state.');
    for (const t of ['response.created', 'response.in_progress', 'response.output_item.added',
      'response.content_part.added', 'response.output_text.done', 'response.output_item.done', 'response.completed']) {
      assert.ok(types.has(t), `saw ${t}`);
    }
    assert.equal(done.output_text, 'Order 1042 has shipped.');
    assert.equal(done.usage.input_tokens, 2150);
    assert.equal(done.usage.input_tokens_details.cached_tokens, 1920);
    assert.equal(done.usage.output_tokens_details.reasoning_tokens, 64);
    const sent = lastRequest().body.input;
    assert.equal(sent[sent.length - 1].type, 'function_call_output');
  });

  await check('raw stream: function_call_arguments deltas add up to the done event', async () => {
    const s = await client.responses.create({ model: 'gpt-test', input: 'Weather?', tools: fn, stream: true });
    let args = '';
    let doneArgs = null;
    let completed = null;
    let lastSeq = -1;
    for await (const ev of s) {
      assert.equal(ev.sequence_number, lastSeq + 1, 'sequence numbers count up');
      lastSeq = ev.sequence_number;
      if (ev.type === 'response.function_call_arguments.delta') args += ev.delta;
      if (ev.type === 'response.function_call_arguments.done') doneArgs = ev.arguments;
      if (ev.type === 'response.completed') completed = ev.response;
    }
    assert.equal(args, doneArgs);
    assert.deepEqual(JSON.parse(args), { city: 'Oslo', units: 'metric' });
    assert.equal(completed.output[0].type, 'function_call');
    assert.equal(completed.output[0].call_id, 'call_r2');
    assert.equal(completed.usage.output_tokens, 16);
  });

  await check('max_tokens maps to status incomplete / max_output_tokens', async () => {
    const r = await client.responses.create({ model: 'gpt-test', input: 'x', max_output_tokens: 2 });
    assert.equal(r.status, 'incomplete');
    assert.equal(r.incomplete_details.reason, 'max_output_tokens');
    assert.equal(r.output_text, 'Cut off');
  });

  await check('mid-stream error event throws', async () => {
    await expectThrow(async () => {
      const s = await client.responses.create({ model: 'gpt-test', input: 'x', stream: true });
      for await (const _ of s) { /* drain */ }
    }, (e) => assert.match(String(e.message), /server had an error/));
  });
}

// ------------------------------------------------------------- Gemini
async function gemini() {
  const { GoogleGenAI } = await import('@google/genai');
  const ai = new GoogleGenAI({ apiKey: process.env.GEMINI_API_KEY, httpOptions: { baseUrl: FAKE_URL } });
  const config = { tools: [{ functionDeclarations: [{ name: 'lookup', description: tools.lookup.description,
    parametersJsonSchema: tools.lookup.parameters }] }] };
  const contents = [{ role: 'user', parts: [{ text: 'Where is order 1042?' }] }];
  let first;

  await check('generateContent: functionCall, promptTokenCount INCLUDES cached, thoughts outside candidates', async () => {
    first = await ai.models.generateContent({ model: 'gemini-test', contents, config });
    assert.equal(first.text, 'Let me look that up.');
    assert.equal(first.functionCalls.length, 1);
    assert.equal(first.functionCalls[0].name, 'lookup');
    assert.deepEqual(first.functionCalls[0].args, { order: 1042 });
    assert.equal(first.candidates[0].finishReason, 'STOP');
    const u = first.usageMetadata;
    assert.equal(u.promptTokenCount, 2348);
    assert.equal(u.cachedContentTokenCount, 2048);
    assert.equal(u.candidatesTokenCount, 20);
    assert.equal(u.thoughtsTokenCount, 100);
    assert.equal(u.totalTokenCount, 2468);
    const req = lastRequest();
    assert.equal(req.path, '/v1beta/models/gemini-test:generateContent');
    assert.equal(req.headers['x-goog-api-key'], process.env.GEMINI_API_KEY);
  });

  await check('tool round: functionResponse goes out, text comes back', async () => {
    const r = await ai.models.generateContent({ model: 'gemini-test', config, contents: [...contents,
      first.candidates[0].content,
      { role: 'user', parts: [{ functionResponse: { name: 'lookup', response: { status: 'shipped' } } }] }] });
    assert.equal(r.text, 'Order 1042 has shipped.');
    assert.equal(r.usageMetadata.promptTokenCount, 2368);
    assert.equal(r.usageMetadata.candidatesTokenCount, 8);
    assert.equal(r.usageMetadata.thoughtsTokenCount, undefined);
    const sent = lastRequest().body.contents;
    assert.ok(sent[2].parts[0].functionResponse, 'functionResponse was sent');
  });

  await check('generateContentStream: text and thought parts, last chunk holds the usage', async () => {
    const s = await ai.models.generateContentStream({ model: 'gemini-test', contents,
      config: { thinkingConfig: { includeThoughts: true } } });
    let text = '';
    let thoughts = '';
    let last = null;
    let n = 0;
    for await (const chunk of s) {
      n++;
      for (const p of chunk.candidates?.[0]?.content?.parts || []) {
        if (p.thought) thoughts += p.text; else if (p.text) text += p.text;
      }
      last = chunk;
    }
    assert.ok(n > 2, 'several chunks');
    assert.equal(text, 'Streaming the status of order 1042.');
    assert.equal(thoughts, 'Thinking about the order.');
    assert.equal(last.candidates[0].finishReason, 'STOP');
    assert.equal(last.usageMetadata.promptTokenCount, 1074);
    assert.equal(last.usageMetadata.cachedContentTokenCount, 1024);
    assert.equal(last.usageMetadata.candidatesTokenCount, 10);
    assert.equal(last.usageMetadata.thoughtsTokenCount, 80);
    const req = lastRequest();
    assert.equal(req.path, '/v1beta/models/gemini-test:streamGenerateContent');
    assert.equal(req.query, 'alt=sse');
  });

  await check('generateContentStream: a function call arrives whole', async () => {
    const s = await ai.models.generateContentStream({ model: 'gemini-test', contents, config });
    const calls = [];
    for await (const chunk of s) calls.push(...(chunk.functionCalls || []));
    assert.equal(calls.length, 1);
    assert.equal(calls[0].name, 'weather');
    assert.deepEqual(calls[0].args, { city: 'Lima' });
  });

  await check('stream split into 4-byte writes (CRLF, Gemini style) parses', async () => {
    const s = await ai.models.generateContentStream({ model: 'gemini-test', contents });
    let text = '';
    for await (const chunk of s) text += chunk.text || '';
    assert.equal(text, 'Split and CRLF.');
  });

  await check('mid-stream error object throws an ApiError 503', async () => {
    await expectThrow(async () => {
      const s = await ai.models.generateContentStream({ model: 'gemini-test', contents });
      for await (const _ of s) { /* drain */ }
    }, (e) => {
      assert.match(String(e.message), /UNAVAILABLE/);
    });
  });

  await check('max_tokens maps to finishReason MAX_TOKENS', async () => {
    const r = await ai.models.generateContent({ model: 'gemini-test', contents });
    assert.equal(r.candidates[0].finishReason, 'MAX_TOKENS');
    assert.equal(r.text, 'Cut off');
  });
}

const suites = { anthropic, 'openai-chat': openaiChat, 'openai-responses': openaiResponses, gemini };
if (!suites[suite]) {
  console.error(`usage: node conformance.mjs ${Object.keys(suites).join('|')}`);
  process.exit(2);
}
await suites[suite]();
console.log(`${suite}: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
