// Drives a headless chromium through the DevTools protocol for
// test_admin_auth.py's dashboard test:
//   node [--experimental-websocket] cdp_steps.js STEPS.json
// STEPS.json is an array run in order; each step may have
//   goto: URL      navigate the page there
//   eval: EXPR     evaluate EXPR in the page (awaited), then with
//   expect: VALUE  retry until the result equals VALUE (JSON), or with
//   match: REGEX   until its string matches, for up to timeout ms (5000)
//   what: TEXT     the name printed for the step
//   noErrors: true passes when the page has thrown no uncaught exception
//                  and logged no console.error since the run began
// Prints one line per checked step ("ok ..." / "FAIL ..."); exit 0 when all
// passed, 1 when one failed (the rest are skipped), 2 when chromium did not
// start or the run took over 90 s. Chromium gets a fresh profile in a
// temporary directory, removed at the end.
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const steps = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const prof = fs.mkdtempSync(path.join(os.tmpdir(), 'rt-cdp-'));
const bin = process.env.CHROMIUM || 'chromium';
const ch = spawn(bin, ['--headless=new', '--no-sandbox', '--disable-gpu',
  '--no-first-run', '--remote-debugging-port=0', '--user-data-dir=' + prof,
  'about:blank'], { stdio: ['ignore', 'ignore', 'pipe'] });
const sleep = ms => new Promise(r => setTimeout(r, ms));
let log = '', started = false;

function finish(code) {
  ch.kill('SIGKILL');
  setTimeout(() => {
    try { fs.rmSync(prof, { recursive: true, force: true }); } catch (e) { }
    process.exit(code);
  }, 300);
}
setTimeout(() => { console.log('FAIL timeout; chromium said:\n' + log); finish(2); }, 90000);
ch.on('exit', c => { if (!started) { console.log('FAIL chromium exited ' + c + ':\n' + log); finish(2); } });

ch.stderr.on('data', async d => {
  log += d;
  const m = log.match(/DevTools listening on (ws:\/\/\S+)/);
  if (!m || started) return;
  started = true;
  const port = new URL(m[1]).port;
  const t = await (await fetch(`http://127.0.0.1:${port}/json/new?about:blank`,
    { method: 'PUT' })).json();
  const ws = new WebSocket(t.webSocketDebuggerUrl);
  let id = 0;
  const wait = {};
  const errors = [];
  ws.onmessage = e => {
    const msg = JSON.parse(e.data);
    if (msg.id && wait[msg.id]) { wait[msg.id](msg); delete wait[msg.id]; }
    if (msg.method === 'Runtime.exceptionThrown') {
      const d = msg.params.exceptionDetails;
      errors.push((d.exception && d.exception.description) || d.text);
    }
    if (msg.method === 'Runtime.consoleAPICalled' && msg.params.type === 'error') {
      errors.push(msg.params.args.map(a => a.value !== undefined ? a.value
        : a.description).join(' '));
    }
  };
  const call = (method, params) => new Promise(r => {
    const i = ++id; wait[i] = r; ws.send(JSON.stringify({ id: i, method, params }));
  });
  ws.onopen = async () => {
    await call('Runtime.enable', {});
    for (const s of steps) {
      if (s.goto) await call('Page.navigate', { url: s.goto });
      if (s.noErrors) {
        const pass = errors.length === 0;
        console.log((pass ? 'ok   ' : 'FAIL ') + (s.what || 'no page errors') +
          ' => ' + JSON.stringify(errors).slice(0, 2000));
        if (!pass) { ws.close(); finish(1); return; }
        continue;
      }
      if (!s.eval) continue;
      const end = Date.now() + (s.timeout || 5000);
      let v, pass;
      for (;;) {
        const r = await call('Runtime.evaluate', { expression: s.eval,
          awaitPromise: true, returnByValue: true });
        v = r.result && r.result.result ? r.result.result.value : r;
        pass = s.match ? new RegExp(s.match).test(String(v))
          : s.expect === undefined || JSON.stringify(v) === JSON.stringify(s.expect);
        if (pass || Date.now() > end) break;
        await sleep(100);
      }
      console.log((pass ? 'ok   ' : 'FAIL ') + (s.what || s.eval) + ' => ' +
        JSON.stringify(v === undefined ? null : v).slice(0, 200));
      if (!pass) { ws.close(); finish(1); return; }
    }
    ws.close();
    finish(0);
  };
});
