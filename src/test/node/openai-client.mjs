// Drives a running hyspec server with the official OpenAI Node SDK, as an application would.
//
//   node openai-client.mjs http://localhost:8000/v1      (or HYSPEC_BASE_URL=...)
//
// Lists the models, runs one chat non-streaming and streaming (temperature 0, so both must give the
// same text), a completion with a token-id prompt and the return_token_ids extension, and a request
// the server must refuse. Prints one JSON summary on stdout (the requests it sent and what came back,
// for OpenAiNodeClientTest to replay against the server) and exits 1 on any mismatch.
import OpenAI from 'openai';

const baseURL = process.argv[2] ?? process.env.HYSPEC_BASE_URL;
if (!baseURL) {
  console.error('usage: node openai-client.mjs <base URL, e.g. http://localhost:8000/v1>');
  process.exit(2);
}

// maxRetries 0: a failure must show at once, not after the SDK's back-off
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 30_000 });
const MODEL = 'nemotron_h_chat';
const failures = [];

function check(ok, what) {
  if (!ok) {
    failures.push(what);
  }
}

const models = [];
for await (const m of client.models.list()) {
  models.push(m.id);
}
check(models.includes(MODEL), `GET /models lists ${MODEL}: ${JSON.stringify(models)}`);

const chatRequest = {
  model: MODEL,
  messages: [
    { role: 'system', content: 'You are a terse assistant.' },
    { role: 'user', content: 'Name three colours.' },
  ],
  temperature: 0,
  max_tokens: 24,
};
const whole = await client.chat.completions.create(chatRequest);
const text = whole.choices[0].message.content;
check(whole.object === 'chat.completion', `object is chat.completion: ${whole.object}`);
check(typeof text === 'string' && text.length > 0, `the chat answered text: ${JSON.stringify(text)}`);

let streamedText = '';
let chunks = 0;
let finishReason = null;
let usage = null;
const stream = await client.chat.completions.create({
  ...chatRequest,
  stream: true,
  stream_options: { include_usage: true },
});
for await (const chunk of stream) {
  chunks++;
  for (const choice of chunk.choices) {
    streamedText += choice.delta?.content ?? '';
    finishReason = choice.finish_reason ?? finishReason;
  }
  if (chunk.usage) {
    check(chunk.choices.length === 0, 'the usage chunk has no choices');
    usage = chunk.usage;
  }
}
check(streamedText === text, `streamed text equals the whole answer: ${JSON.stringify(streamedText)} vs ${JSON.stringify(text)}`);
check(chunks >= 3, `several chunks were streamed: ${chunks}`);
check(finishReason === whole.choices[0].finish_reason, `same finish reason: ${finishReason} vs ${whole.choices[0].finish_reason}`);
check(usage !== null, 'the usage chunk arrived');
// token counts only: cached_tokens differs, as the second request finds the first one's prompt cached
const counts = (u) => JSON.stringify([u?.prompt_tokens, u?.completion_tokens, u?.total_tokens]);
check(counts(usage) === counts(whole.usage),
  `streamed usage counts equal the whole answer's: ${JSON.stringify(usage)} vs ${JSON.stringify(whole.usage)}`);

// return_token_ids and ignore_eos are hyspec (vLLM) extensions: the SDK passes unknown fields through
const completionRequest = {
  model: MODEL,
  prompt: [5, 6, 7, 8, 5, 6, 7, 8],
  temperature: 0,
  max_tokens: 12,
  ignore_eos: true,
  return_token_ids: true,
};
const completion = await client.completions.create(completionRequest);
const tokenIds = completion.choices[0].token_ids;
check(Array.isArray(tokenIds) && tokenIds.length === 12, `12 token ids: ${JSON.stringify(tokenIds)}`);
check(JSON.stringify(completion.choices[0].prompt_token_ids) === JSON.stringify(completionRequest.prompt),
  `prompt_token_ids echo the prompt: ${JSON.stringify(completion.choices[0].prompt_token_ids)}`);
check(completion.usage?.completion_tokens === 12, `usage counts 12 tokens: ${JSON.stringify(completion.usage)}`);

let refused = null;
try {
  await client.chat.completions.create({ ...chatRequest, model: 'no-such-model' });
  check(false, 'an unknown model is refused');
} catch (err) {
  refused = { name: err.constructor.name, status: err.status, param: err.param, code: err.code, message: err.message };
  check(err instanceof OpenAI.BadRequestError, `an unknown model raises BadRequestError: ${err}`);
  check(err.status === 400 && err.param === 'model' && err.error?.param === 'model',
    `the error names param model: ${JSON.stringify(refused)}`);
}

console.log(JSON.stringify({
  models,
  chat: { request: chatRequest, text, finishReason: whole.choices[0].finish_reason, usage: whole.usage },
  stream: { text: streamedText, chunks, finishReason, usage },
  completion: { request: completionRequest, text: completion.choices[0].text, tokenIds },
  refused,
  failures,
}, null, 2));
process.exit(failures.length === 0 ? 0 : 1);
