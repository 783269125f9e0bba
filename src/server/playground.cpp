#include "server/playground.h"

namespace pagoda {
namespace {

// The whole page (HTML, CSS and script) in one literal, served as it is.
constexpr std::string_view kPage = R"PAGE(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Pagoda playground</title>
<style>
  :root { --bg:#f6f5f1; --fg:#1d1d1b; --muted:#6b6b66; --accent:#9c2f1f; --card:#fff; --line:#dedbd2; }
  * { box-sizing: border-box; }
  body { margin:0; font:15px/1.5 system-ui, sans-serif; background:var(--bg); color:var(--fg); display:flex; height:100vh; }
  aside { width:260px; padding:16px; border-right:1px solid var(--line); background:var(--card); overflow:auto; }
  aside h1 { font-size:18px; margin:0 0 4px; color:var(--accent); }
  aside .model { color:var(--muted); font-size:13px; margin-bottom:16px; word-break:break-all; }
  label { display:block; font-size:13px; margin-top:12px; color:var(--muted); }
  input[type=range] { width:100%; }
  input[type=number], textarea { width:100%; font:inherit; padding:6px; border:1px solid var(--line); border-radius:6px; }
  main { flex:1; display:flex; flex-direction:column; }
  #log { flex:1; overflow:auto; padding:20px; }
  .msg { max-width:760px; margin:0 auto 14px; padding:10px 14px; border-radius:10px; white-space:pre-wrap; background:var(--card); border:1px solid var(--line); }
  .msg.user { background:#efe9dc; }
  .msg .who { font-size:12px; color:var(--muted); margin-bottom:4px; }
  form { display:flex; gap:8px; padding:12px 20px; border-top:1px solid var(--line); background:var(--card); }
  form textarea { flex:1; height:64px; resize:vertical; }
  button { font:inherit; padding:8px 16px; border:0; border-radius:8px; background:var(--accent); color:#fff; cursor:pointer; }
  button.secondary { background:#ccc7ba; color:var(--fg); }
  #stats { font-size:13px; color:var(--muted); margin-top:16px; }
</style>
</head>
<body>
<aside>
  <h1>Pagoda</h1>
  <div class="model" id="model">loading…</div>
  <label>Temperature <span id="tv">0.7</span><input id="temperature" type="range" min="0" max="2" step="0.05" value="0.7"></label>
  <label>Top-p <span id="pv">0.95</span><input id="top_p" type="range" min="0.05" max="1" step="0.05" value="0.95"></label>
  <label>Max tokens<input id="max_tokens" type="number" min="1" value="256"></label>
  <label>System prompt<textarea id="system" rows="3" placeholder="optional"></textarea></label>
  <label>API key<input id="key" type="password" placeholder="if the server needs one" style="width:100%"></label>
  <div id="stats">tokens/s: –</div>
  <p><button class="secondary" id="clear" type="button">New chat</button></p>
</aside>
<main>
  <div id="log"></div>
  <form id="form">
    <textarea id="input" placeholder="Type a message; Enter sends, Shift+Enter for a new line"></textarea>
    <button id="send" type="submit">Send</button>
  </form>
</main>
<script>
const $ = (id) => document.getElementById(id);
let history = [];
let model = "";
let busy = false;
$("temperature").oninput = (e) => $("tv").textContent = e.target.value;
$("top_p").oninput = (e) => $("pv").textContent = e.target.value;
fetch("/v1/models", {headers: auth()}).then(r => r.json()).then(j => { model = j.data[0].id; $("model").textContent = model; })
  .catch(() => $("model").textContent = "(models unavailable)");
function auth() { const k = $("key").value; return k ? {"Authorization": "Bearer " + k} : {}; }
function add(role, text) {
  const d = document.createElement("div");
  d.className = "msg " + role;
  d.innerHTML = '<div class="who"></div><div class="text"></div>';
  d.querySelector(".who").textContent = role;
  d.querySelector(".text").textContent = text;
  $("log").appendChild(d);
  $("log").scrollTop = $("log").scrollHeight;
  return d.querySelector(".text");
}
$("clear").onclick = () => { history = []; $("log").innerHTML = ""; };
$("input").addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("form").requestSubmit(); } });
$("form").onsubmit = async (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  if (!text || busy) return;
  busy = true; $("send").disabled = true;
  $("input").value = "";
  add("user", text);
  history.push({role: "user", content: text});
  const out = add("assistant", "");
  const messages = [];
  if ($("system").value.trim()) messages.push({role: "system", content: $("system").value.trim()});
  messages.push(...history);
  const body = {model, messages, stream: true, temperature: +$("temperature").value, top_p: +$("top_p").value,
                max_tokens: +$("max_tokens").value, stream_options: {include_usage: true}};
  let reply = "", tokens = 0, first = 0;
  const t0 = performance.now();
  try {
    const r = await fetch("/v1/chat/completions", {method: "POST", headers: {"Content-Type": "application/json", ...auth()}, body: JSON.stringify(body)});
    if (!r.ok) { const j = await r.json().catch(() => ({})); throw new Error((j.error && j.error.message) || r.statusText); }
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buf += dec.decode(value, {stream: true});
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const line = buf.slice(0, i).trim(); buf = buf.slice(i + 2);
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") continue;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message);
        for (const c of j.choices || []) {
          const d = (c.delta && c.delta.content) || "";
          if (d) { if (!first) first = performance.now(); reply += d; tokens++; out.textContent = reply; }
        }
        if (j.usage) tokens = j.usage.completion_tokens;
        const secs = (performance.now() - (first || t0)) / 1000;
        $("stats").textContent = "tokens/s: " + (secs > 0 ? (tokens / secs).toFixed(1) : "–") + " · " + tokens + " tokens";
        $("log").scrollTop = $("log").scrollHeight;
      }
    }
    history.push({role: "assistant", content: reply});
  } catch (err) {
    out.textContent = reply + "\n[error: " + err.message + "]";
  }
  busy = false; $("send").disabled = false;
};
// ?q=... sends that message on load (a link to a prompt; also how the tests drive the page).
const q = new URLSearchParams(location.search).get("q");
if (q) { $("input").value = q; $("form").requestSubmit(); }
</script>
</body>
</html>
)PAGE";

}  // namespace

std::string_view playground_html() { return kPage; }

}  // namespace pagoda
