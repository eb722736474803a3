// hyspec's page: streams POST /v1/completions (OpenAI server-sent events) into #output.
// EventSource cannot POST, so the stream is read with fetch and a ReadableStream reader.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const form = $('form');
  const prompt = $('prompt');
  const maxTokens = $('max-tokens');
  const temperature = $('temperature');
  const strategy = $('strategy');
  const specMethod = $('spec-method');
  const specK = $('spec-k');
  const generate = $('generate');
  const stop = $('stop');
  const status = $('status');
  const error = $('error');
  const output = $('output');

  let modelId = null;
  let controller = null; // the running generation's AbortController, null when idle

  function setStatus(state) {
    status.textContent = state;
    status.dataset.state = state;
  }

  function showError(message) {
    error.textContent = message;
    error.hidden = false;
    setStatus('error');
  }

  // The message of an OpenAI error body {"error": {"message", "type", "param", "code"}}, or the raw answer.
  async function errorMessage(res) {
    const text = await res.text();
    try {
      const body = JSON.parse(text);
      if (body && body.error && body.error.message) {
        return describe(body.error, res.status);
      }
    } catch (ignored) {
      // not JSON: show the text itself
    }
    return `HTTP ${res.status} ${res.statusText}${text ? ': ' + text.slice(0, 500) : ''}`;
  }

  function describe(err, httpStatus) {
    const details = [httpStatus ? `HTTP ${httpStatus}` : null, err.type, err.param ? `param ${err.param}` : null]
      .filter(Boolean).join(', ');
    return details ? `${err.message} (${details})` : err.message;
  }

  async function loadModel() {
    try {
      const res = await fetch('/v1/models', { headers: { Accept: 'application/json' } });
      if (!res.ok) {
        throw new Error(await errorMessage(res));
      }
      const list = await res.json();
      if (!list.data || list.data.length === 0) {
        $('model').textContent = 'none';
        showError('The server lists no models: start it with hyspec.model.path set to a checkpoint folder.');
        return;
      }
      modelId = list.data[0].id;
      $('model').textContent = modelId;
      generate.disabled = false;
      setStatus('idle');
    } catch (e) {
      $('model').textContent = 'unavailable';
      showError(`Could not list models: ${e.message}`);
    }
  }

  function requestBody() {
    const body = {
      model: modelId,
      prompt: prompt.value,
      max_tokens: Number(maxTokens.value),
      temperature: Number(temperature.value),
      stream: true,
      stream_options: { include_usage: true },
    };
    if (strategy.value) { // empty: the server's default (or its A/B split)
      body.rollback_strategy = strategy.value;
    }
    body.speculative = specMethod.value === 'none'
      ? { method: 'none' }
      : { method: specMethod.value, num_tokens: Number(specK.value) };
    return body;
  }

  // Calls onData with each event's data (its "data:" lines joined), in order, until onData returns
  // true or the stream ends. Events are separated by a blank line and may be split across reads.
  async function readEvents(body, onData) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let pending = ''; // text after the last complete event, line ends normalised to \n
    let carry = '';   // a trailing \r whose \n may come in the next read
    for (;;) {
      const { value, done } = await reader.read();
      let text = carry + (value ? decoder.decode(value, { stream: true }) : '') + (done ? decoder.decode() : '');
      carry = '';
      if (!done && text.endsWith('\r')) {
        carry = '\r';
        text = text.slice(0, -1);
      }
      pending += text.replace(/\r\n?/g, '\n');
      let end;
      while ((end = pending.indexOf('\n\n')) >= 0) {
        const block = pending.slice(0, end);
        pending = pending.slice(end + 2);
        if (dispatch(block, onData)) {
          await reader.cancel().catch(() => {});
          return;
        }
      }
      if (done) {
        if (pending.trim()) {
          dispatch(pending, onData);
        }
        return;
      }
    }
  }

  function dispatch(block, onData) {
    const data = block.split('\n')
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5));
    return data.length > 0 && onData(data.join('\n')) === true;
  }

  function resetRun() {
    error.hidden = true;
    error.textContent = '';
    output.textContent = '';
    output.dataset.updates = '0';
    for (const id of ['stats-strategy', 'stats-acceptance', 'stats-tokens', 'stats-speed', 'stats-finish']) {
      $(id).textContent = '–';
    }
    delete $('stats-acceptance').dataset.rate;
  }

  function showStats(run, elapsedMs) {
    const h = run.hyspec;
    if (h) {
      $('stats-strategy').textContent = h.rollback_strategy;
      const acceptance = $('stats-acceptance');
      acceptance.dataset.rate = String(h.acceptance_rate);
      acceptance.textContent = h.draft_tokens > 0
        ? `${(100 * h.acceptance_rate).toFixed(1)}% (${h.accepted_tokens} of ${h.draft_tokens} draft tokens accepted)`
        : 'no draft tokens proposed';
    }
    if (run.usage) {
      const u = run.usage;
      const cached = h && h.cached_prompt_tokens ? `, ${h.cached_prompt_tokens} cached` : '';
      $('stats-tokens').textContent = `${u.completion_tokens} generated, ${u.prompt_tokens} prompt${cached}`;
      const seconds = elapsedMs / 1000;
      $('stats-speed').textContent = seconds > 0
        ? `${(u.completion_tokens / seconds).toFixed(1)} tokens/s (${seconds.toFixed(2)} s)`
        : '–';
    }
    if (run.finish) {
      $('stats-finish').textContent = run.finish;
    }
  }

  async function start() {
    resetRun();
    setStatus('streaming');
    output.setAttribute('aria-busy', 'true');
    generate.disabled = true;
    stop.disabled = false;
    controller = new AbortController();
    const started = performance.now();
    const run = { done: false, error: null, finish: null, hyspec: null, usage: null };
    const text = output.appendChild(document.createTextNode(''));
    let updates = 0;
    try {
      const res = await fetch('/v1/completions', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' },
        body: JSON.stringify(requestBody()),
        signal: controller.signal,
      });
      if (!res.ok) {
        showError(await errorMessage(res));
        return;
      }
      await readEvents(res.body, (data) => {
        if (data === '[DONE]') {
          run.done = true;
          return true;
        }
        let chunk;
        try {
          chunk = JSON.parse(data);
        } catch (e) {
          throw new Error(`The server sent an unreadable event: ${data.slice(0, 200)}`);
        }
        if (chunk.error) { // an error mid-stream; [DONE] follows
          run.error = chunk.error;
          return false;
        }
        for (const choice of chunk.choices || []) {
          if (choice.text) {
            text.appendData(choice.text);
            output.dataset.updates = String(++updates);
          }
          run.finish = choice.finish_reason || run.finish;
        }
        run.hyspec = chunk.hyspec || run.hyspec;
        run.usage = chunk.usage || run.usage;
        return false;
      });
      showStats(run, performance.now() - started);
      if (run.error) {
        showError(describe(run.error));
      } else if (!run.done) {
        showError('The stream ended before [DONE]: the server closed the connection.');
      } else {
        setStatus('done');
      }
    } catch (e) {
      if (e.name === 'AbortError') {
        setStatus('stopped');
      } else {
        controller.abort(); // closing the connection aborts the request on the server
        showError(e.message);
      }
    } finally {
      controller = null;
      output.removeAttribute('aria-busy');
      generate.disabled = modelId === null;
      stop.disabled = true;
    }
  }

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (!controller && modelId !== null) {
      start();
    }
  });
  prompt.addEventListener('keydown', (e) => { // Ctrl/Cmd+Enter generates
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
      form.requestSubmit();
    }
  });
  stop.addEventListener('click', () => controller && controller.abort());
  specMethod.addEventListener('change', () => { specK.disabled = specMethod.value === 'none'; });

  loadModel();
})();
