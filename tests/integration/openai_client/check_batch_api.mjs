// Drives nightshiftd's Files and Batches API with the official OpenAI client
// (tests/integration/openai_client.sh starts the daemon and checks the
// database around this). Every object the server returns is checked against
// the client's own TypeScript declarations (resources/batches.d.ts,
// files.d.ts, shared.d.ts of the installed package): each field the type
// requires is present with its declared type; an optional field is absent,
// null (as OpenAI's API sends an unset one) or of its declared type.
//
// Usage: node check_batch_api.mjs BASE_URL KEY WORK_DIR MODE
//   MODE full:      the whole flow (prints "ok ..." lines and a JSON summary)
//   MODE wrong-key: every call must fail with 401
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI, { toFile } from 'openai';

const [baseURL, apiKey, work, mode] = process.argv.slice(2);
const here = path.dirname(fileURLToPath(import.meta.url));
const resources = path.join(here, 'node_modules', 'openai', 'resources');

function fail(msg) {
  console.error(`FAIL: ${msg}`);
  process.exit(1);
}
function check(cond, msg) {
  if (!cond) fail(msg);
}

// ---- the client's type declarations ---------------------------------------
function closingBrace(text, open) {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === '{') depth++;
    if (text[i] === '}' && --depth === 0) return i;
  }
  throw new Error('unbalanced braces');
}
const stripComments = (t) => t.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
// name -> body text: "Batch", and a namespace's "Batch.Errors".
function declarations(file) {
  const text = stripComments(fs.readFileSync(path.join(resources, file), 'utf8'));
  const out = new Map();
  const re = /export (?:interface (\w+)|declare namespace (\w+)|type (\w+) =)\s*\{/g;
  let m;
  while ((m = re.exec(text))) {
    const open = re.lastIndex - 1;
    const close = closingBrace(text, open);
    const body = text.slice(open + 1, close);
    if (m[1] || m[3]) {
      out.set(m[1] || m[3], body);
    } else {
      const inner = /interface (\w+)\s*\{/g;
      let n;
      while ((n = inner.exec(body))) {
        const e = closingBrace(body, inner.lastIndex - 1);
        out.set(`${m[2]}.${n[1]}`, body.slice(inner.lastIndex, e));
        inner.lastIndex = e;
      }
    }
    re.lastIndex = close;
  }
  return out;
}
const types = new Map([...declarations('shared.d.ts'), ...declarations('files.d.ts'), ...declarations('batches.d.ts')]);

// Splits at `sep` outside <>, (), {}, [] and quotes.
function splitTop(text, sep) {
  const parts = [];
  let depth = 0, quote = null, cur = '';
  for (const ch of text) {
    if (quote) { if (ch === quote) quote = null; cur += ch; continue; }
    if (ch === "'" || ch === '"') quote = ch;
    if ('<({['.includes(ch)) depth++;
    if ('>)}]'.includes(ch)) depth--;
    if (ch === sep && depth === 0) { parts.push(cur); cur = ''; } else cur += ch;
  }
  if (cur.trim()) parts.push(cur);
  return parts.map((p) => p.trim()).filter(Boolean);
}
function fields(body) {
  return splitTop(body, ';').map((f) => {
    const m = /^(\[key: string\]|\w+)(\?)?:\s*([\s\S]+)$/.exec(f);
    if (!m) throw new Error(`cannot read the declaration '${f}'`);
    return { name: m[1], optional: !!m[2], type: m[3].trim() };
  });
}
function resolve(name, scope) {
  const bare = name.replace(/^\w+API\./, '').replace(/^Shared\./, '');
  for (const key of [bare, `${scope}.${bare}`]) if (types.has(key)) return key;
  return null;
}
// Problems of `value` against the TypeScript type text (empty: it conforms).
function problems(value, type, where, scope) {
  const alternatives = splitTop(type, '|');
  if (alternatives.length > 1) {
    const each = alternatives.map((t) => problems(value, t, where, scope));
    return each.some((p) => p.length === 0) ? [] : [`${where}: ${JSON.stringify(value)} is not ${type}`];
  }
  const t = type.trim();
  if (t === 'null') return value === null ? [] : [`${where}: not null`];
  if (t === 'string' || t === 'number' || t === 'boolean') {
    return typeof value === t ? [] : [`${where}: ${JSON.stringify(value)} is not a ${t}`];
  }
  if (/^'.*'$/.test(t)) return value === t.slice(1, -1) ? [] : [`${where}: ${JSON.stringify(value)} is not ${t}`];
  const array = /^Array<([\s\S]+)>$/.exec(t) || /^([\w.]+)\[\]$/.exec(t);
  if (array) {
    if (!Array.isArray(value)) return [`${where}: not an array`];
    return value.flatMap((v, i) => problems(v, array[1], `${where}[${i}]`, scope));
  }
  const key = resolve(t, scope);
  if (!key) throw new Error(`${where}: the type ${t} is not declared in the files read; extend the checker`);
  return objectProblems(value, key, where);
}
function objectProblems(value, key, where) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return [`${where}: not an object (${key})`];
  const out = [];
  const scope = key.split('.')[0];
  for (const f of fields(types.get(key))) {
    if (f.name === '[key: string]') {
      for (const [k, v] of Object.entries(value)) out.push(...problems(v, f.type, `${where}.${k}`, scope));
      continue;
    }
    if (!(f.name in value)) {
      if (!f.optional) out.push(`${where}.${f.name}: missing (required by ${key})`);
      continue;
    }
    if (f.optional && value[f.name] === null) continue;
    out.push(...problems(value[f.name], f.type, `${where}.${f.name}`, scope));
  }
  return out;
}
function conforms(value, key, what) {
  check(types.has(key), `${key} is not declared by the installed openai package`);
  const p = objectProblems(value, key, what);
  check(p.length === 0, `${what} does not match the client's ${key} type:\n  ${p.join('\n  ')}\n${JSON.stringify(value)}`);
}
// Fields a batch in this state must have set (not absent, not null).
function set(obj, names, what) {
  for (const n of names) check(obj[n] !== undefined && obj[n] !== null, `${what}.${n} is not set: ${JSON.stringify(obj)}`);
}

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30000 });
const jsonl = (lines) => lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
const chatLine = (id, model, content, max_tokens = 4) => ({
  custom_id: id, method: 'POST', url: '/v1/chat/completions',
  body: { model, messages: [{ role: 'user', content }], max_tokens, temperature: 0, ignore_eos: true },
});

async function poll(id, until, what) {
  // Bounded: the daemon's state decides, the deadline only stops a hung test.
  const deadline = Date.now() + 60000;
  for (;;) {
    const b = await client.batches.retrieve(id);
    conforms(b, 'Batch', `${what} (${b.status})`);
    if (until.includes(b.status)) return b;
    check(['validating', 'in_progress', 'finalizing', 'cancelling'].includes(b.status), `${what} became ${b.status}`);
    check(Date.now() < deadline, `${what} still ${b.status} after 60 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function full() {
  // A file with an invalid line is refused whole, naming the line.
  try {
    await client.files.create({ file: await toFile(Buffer.from(jsonl([chatLine('a', 'gpt-4o-mini', 'x')]) + '{"custom_id": "b"}\n'), 'bad.jsonl'), purpose: 'batch' });
    fail('a file with an invalid line was accepted');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError, `bad upload: ${e}`);
    check(/line 2/.test(e.message), `the bad upload's error names its line: ${e.message}`);
  }

  // Three requests: two on the alias, one on a model the daemon does not have.
  const input = await client.files.create({
    file: await toFile(Buffer.from(jsonl([
      chatLine('first', 'gpt-4o-mini', 'Say hello'),
      chatLine('second', 'gpt-4o-mini', 'Count to three'),
      chatLine('unknown', 'gpt-5-turbo-max', 'Nobody runs me'),
    ])), 'requests.jsonl'),
    purpose: 'batch',
  });
  conforms(input, 'FileObject', 'the uploaded file');
  check(input.purpose === 'batch' && input.filename === 'requests.jsonl' && input.bytes > 0, `upload: ${JSON.stringify(input)}`);
  conforms(await client.files.retrieve(input.id), 'FileObject', 'files.retrieve');
  const echoed = await (await client.files.content(input.id)).text();
  check(echoed.split('\n').filter(Boolean).length === 3, 'files.content gives the upload back');

  let batch = await client.batches.create({
    input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: '24h',
    metadata: { run: 'nightly', owner: 'tests' },
  });
  conforms(batch, 'Batch', 'batches.create');
  check(batch.object === 'batch' && batch.input_file_id === input.id && batch.metadata.run === 'nightly', 'create echoes');
  check(batch.errors && batch.errors.data.length === 1 && batch.errors.data[0].line === 3 &&
        batch.errors.data[0].code === 'model_not_found' && /gpt-5-turbo-max/.test(batch.errors.data[0].message),
        `the unknown model is in errors, by line: ${JSON.stringify(batch.errors)}`);
  console.log(`ok created ${batch.id} (${batch.status})`);

  batch = await poll(batch.id, ['completed'], 'the batch');
  set(batch, ['in_progress_at', 'finalizing_at', 'completed_at', 'expires_at', 'output_file_id', 'error_file_id',
              'request_counts', 'usage', 'model'], 'the completed batch');
  check(batch.request_counts.total === 3 && batch.request_counts.completed === 2 && batch.request_counts.failed === 1,
        `request_counts: ${JSON.stringify(batch.request_counts)}`);
  check(batch.usage.output_tokens === 8 && batch.usage.input_tokens > 0, `usage: ${JSON.stringify(batch.usage)}`);
  check(batch.completed_at >= batch.in_progress_at && batch.in_progress_at >= batch.created_at, 'times in order');

  const outMeta = await client.files.retrieve(batch.output_file_id);
  conforms(outMeta, 'FileObject', 'the output file');
  check(outMeta.purpose === 'batch_output', `output purpose ${outMeta.purpose}`);
  const output = (await (await client.files.content(batch.output_file_id)).text()).split('\n').filter(Boolean).map((l) => JSON.parse(l));
  check(output.map((l) => l.custom_id).join(',') === 'first,second', `output lines: ${output.map((l) => l.custom_id)}`);
  for (const l of output) {
    check(l.error === null && l.response.status_code === 200, `output line ${l.custom_id}`);
    check(l.response.body.object === 'chat.completion' && typeof l.response.body.choices[0].message.content === 'string',
          `output body ${JSON.stringify(l.response.body)}`);
    check(l.response.body.usage.completion_tokens === 4, 'four tokens each');
  }
  const errText = await (await client.files.content(batch.error_file_id)).text();
  const errors = errText.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  check(errors.length === 1 && errors[0].custom_id === 'unknown' && errors[0].response === null &&
        errors[0].error.code === 'model_not_found', `error file: ${errText}`);
  fs.writeFileSync(path.join(work, 'output.jsonl'), output.map((l) => JSON.stringify(l)).join('\n') + '\n');
  console.log(`ok completed ${batch.id}: output and error files`);

  // A batch whose jobs wait (the daemon lacks its model's file), cancelled.
  const held = await client.files.create({
    file: await toFile(Buffer.from(jsonl([chatLine('w1', 'gpt-held', 'wait'), chatLine('w2', 'gpt-held', 'wait')])), 'held.jsonl'),
    purpose: 'batch',
  });
  let second = await client.batches.create({ input_file_id: held.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
  check(second.status === 'in_progress', `the second batch is ${second.status}`);
  check(second.errors === null, 'no refused line');
  second = await client.batches.cancel(second.id);
  conforms(second, 'Batch', 'batches.cancel');
  check(['cancelling', 'cancelled'].includes(second.status), `cancel gave ${second.status}`);
  second = await poll(second.id, ['cancelled'], 'the cancelled batch');
  set(second, ['cancelling_at', 'cancelled_at', 'error_file_id'], 'the cancelled batch');
  check(second.output_file_id === null, 'nothing finished: no output file');
  check(second.request_counts.total === 2 && second.request_counts.failed === 2, `${JSON.stringify(second.request_counts)}`);
  const cancelled = (await (await client.files.content(second.error_file_id)).text()).split('\n').filter(Boolean).map((l) => JSON.parse(l));
  check(cancelled.length === 2 && cancelled.every((l) => l.error.code === 'cancelled'), 'cancelled lines');
  try {
    await client.batches.cancel(batch.id);
    fail('a completed batch was cancelled');
  } catch (e) {
    check(e instanceof OpenAI.ConflictError, `cancel of a completed batch: ${e}`);
  }
  console.log(`ok cancelled ${second.id}`);

  // Lists, in pages the client follows.
  const batches = [];
  for await (const b of client.batches.list({ limit: 1 })) {
    conforms(b, 'Batch', 'batches.list');
    batches.push(b.id);
  }
  check(batches.join(',') === [second.id, batch.id].join(','), `batches.list: ${batches}`);
  const files = [];
  for await (const f of client.files.list({ limit: 2 })) {
    conforms(f, 'FileObject', 'files.list');
    files.push(f.id);
  }
  for (const id of [input.id, held.id, batch.output_file_id, batch.error_file_id, second.error_file_id]) {
    check(files.includes(id), `files.list lacks ${id}: ${files}`);
  }
  const outputs = [];
  for await (const f of client.files.list({ purpose: 'batch_output' })) outputs.push(f.id);
  check(outputs.length === 3, `purpose filter: ${outputs}`);

  // Delete; a deleted or unknown id is 404.
  const deleted = await client.files.delete(input.id);
  conforms(deleted, 'FileDeleted', 'files.delete');
  check(deleted.deleted === true && deleted.id === input.id, 'deleted');
  for (const call of [() => client.files.retrieve(input.id), () => client.batches.retrieve('batch_nosuchbatch')]) {
    try {
      await call();
      fail('an unknown id was found');
    } catch (e) {
      check(e instanceof OpenAI.NotFoundError, `unknown id: ${e}`);
    }
  }
  console.log('ok lists and delete');
  console.log(JSON.stringify({ batch: batch.id, cancelled: second.id }));
}

async function wrongKey() {
  const calls = {
    'files.create': async () => client.files.create({ file: await toFile(Buffer.from(jsonl([chatLine('a', 'gpt-4o-mini', 'x')])), 'a.jsonl'), purpose: 'batch' }),
    'files.list': () => client.files.list(),
    'batches.create': () => client.batches.create({ input_file_id: 'file-x', endpoint: '/v1/chat/completions', completion_window: '24h' }),
    'batches.list': () => client.batches.list(),
  };
  for (const [name, call] of Object.entries(calls)) {
    try {
      await call();
      fail(`${name} worked with a wrong key`);
    } catch (e) {
      check(e instanceof OpenAI.AuthenticationError && e.status === 401, `${name} with a wrong key: ${e}`);
    }
  }
  console.log('ok wrong key: 401 everywhere');
}

try {
  await (mode === 'wrong-key' ? wrongKey() : full());
} catch (e) {
  fail(e.stack || String(e));
}
