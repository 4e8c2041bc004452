// The demo's chat page: the AI SDK's UI message stream read by hand (no build step).
// POST chat starts a turn; GET chat/{id}/stream resumes the in-flight one, from the
// Last-Event-ID (the text index) this page has, so a cut stream continues with no gap and
// no repeat on whichever replica answers. Query: ?c=<conversation>&via=<replica index>.
"use strict";

const params = new URLSearchParams(location.search);
const user = params.get("user") || "demo-user";
const via = params.get("via");
let chatId = params.get("c");
if (!chatId) {
  chatId = crypto.randomUUID();
  params.set("c", chatId);
  history.replaceState(null, "", `?${params}`);
}

const RETRY_LIMIT = 40;
const state = {
  messages: [], // UIMessages, as the app stores them
  answer: null, // {id, text}: the assistant message being streamed
  lastEventId: null, // text index after the last text event seen
  busy: false,
};

const $ = (id) => document.getElementById(id);
$("chat-id").textContent = chatId;
$("user").textContent = user;
const other = new URLSearchParams({ c: chatId, user, via: via === "1" ? "0" : "1" });
$("other-tab").href = `?${other}`;

function headers(extra = {}) {
  const out = { "x-agentstores-user": user, ...extra };
  if (via !== null) out["x-demo-replica"] = via;
  return out;
}

function setStatus(text) {
  $("status").textContent = text;
  document.body.dataset.status = text;
}

function note(text, kind = "takeover") {
  const div = document.createElement("div");
  div.className = `note ${kind}`;
  div.textContent = text;
  $("notes").appendChild(div);
}

function log(method, path, response) {
  const replica = response ? response.headers.get("x-agentstores-replica") || "?" : "-";
  const li = document.createElement("li");
  li.className = replica;
  li.dataset.replica = replica;
  li.textContent = `${method} ${path} -> ${response ? response.status : "failed"} ${replica}`;
  $("log").appendChild(li);
  return replica;
}

function textOf(message) {
  return message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
}

function render() {
  const box = $("messages");
  box.replaceChildren();
  const shown = [...state.messages];
  if (state.answer && !shown.some((m) => m.id === state.answer.id)) {
    shown.push({ id: state.answer.id, role: "assistant", parts: [{ type: "text", text: state.answer.text }] });
  }
  for (const message of shown) {
    const div = document.createElement("div");
    div.className = "message";
    div.dataset.role = message.role;
    div.dataset.id = message.id;
    const who = document.createElement("span");
    who.className = "who";
    who.textContent = message.role;
    const text = document.createElement("span");
    text.className = "text";
    text.textContent = textOf(message);
    div.append(who, text);
    box.appendChild(div);
  }
  box.scrollTop = box.scrollHeight; // the newest text in view
}

async function loadTranscript() {
  const path = `conversations/${encodeURIComponent(chatId)}/messages?format=ui`;
  const response = await fetch(path, { headers: headers() });
  log("GET", path, response);
  if (response.status === 404) {
    state.messages = [];
  } else if (response.ok) {
    const body = await response.json();
    state.messages = Array.isArray(body) ? body : body.messages;
  } else {
    note(`transcript: ${response.status} ${await response.text()}`, "error");
  }
  render();
}

// One SSE stream of UI message parts. Returns "finished" when the answer ended ([DONE]
// or finish), "cut" when the connection ended before that (a replica died, a network
// blip): the caller resumes from state.lastEventId.
async function consume(response, replica, resumedFrom) {
  $("served").textContent = replica;
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let finished = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value.replace(/\r\n?/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (handleEvent(event, replica, resumedFrom)) finished = true;
      }
    }
  } catch (error) {
    // the connection broke mid-read: resumed below
  }
  return finished ? "finished" : "cut";
}

function handleEvent(event, replica, resumedFrom) {
  let eventId = null;
  const data = [];
  for (const line of event.split("\n")) {
    if (line.startsWith("id:")) eventId = line.slice(3).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  if (!data.length) return false;
  const payload = data.join("\n");
  if (payload === "[DONE]") return true;
  const part = JSON.parse(payload);
  switch (part.type) {
    case "start":
      if (!state.answer || state.answer.id !== part.messageId) {
        state.answer = { id: part.messageId, text: "" };
      } else if (resumedFrom === null) {
        state.answer.text = ""; // a replay from the start
      }
      break;
    case "text-delta":
      state.answer.text += part.delta;
      break;
    case "data-agentstores-lease":
      note(`takeover: ${replica} took the turn over (epoch ${part.data.epoch}, ${part.data.reason})`);
      break;
    case "error":
      note(`error: ${part.errorText}`, "error");
      break;
    case "finish":
      render();
      return true;
    default:
      break;
  }
  if (eventId !== null) {
    state.lastEventId = Number(eventId);
    const have = state.answer ? [...state.answer.text].length : 0; // code points, as the app counts
    if (have !== state.lastEventId) {
      note(`text index mismatch: have ${have}, event id ${eventId}`, "error");
    }
  }
  render();
  return false;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Follow the answer to its end: after a cut, GET .../stream from the text index we have.
async function follow(response, replica, resumedFrom) {
  setStatus("streaming");
  let outcome = await consume(response, replica, resumedFrom);
  for (let attempt = 0; outcome === "cut" && attempt < RETRY_LIMIT; attempt++) {
    setStatus("reconnecting");
    await sleep(Math.min(100 * (attempt + 1), 1000));
    const path = `chat/${encodeURIComponent(chatId)}/stream`;
    const from = state.lastEventId;
    let next;
    try {
      next = await fetch(path, {
        headers: headers(from === null ? {} : { "last-event-id": String(from) }),
      });
    } catch (error) {
      log("GET", path, null);
      continue;
    }
    const served = log("GET", path, next);
    if (next.status === 204) {
      outcome = "finished"; // ended while we were away: the transcript has it
      break;
    }
    if (!next.ok) continue;
    setStatus("streaming");
    outcome = await consume(next, served, from);
  }
  const streamed = state.answer;
  await loadTranscript();
  state.answer = null;
  state.lastEventId = null;
  render();
  if (streamed) check(streamed);
  setStatus(outcome === "finished" ? "done" : "error");
}

// Say whether the answer as streamed to this page equals the one the store kept.
function check(streamed) {
  $("streamed").textContent = streamed.text;
  $("streamed").dataset.id = streamed.id;
  const assistants = state.messages.filter((m) => m.role === "assistant");
  const stored = state.messages.find((m) => m.id === streamed.id) || assistants[assistants.length - 1];
  if (stored && textOf(stored) === streamed.text) {
    note(`the streamed answer (${streamed.text.length} characters) equals the stored one`, "check");
  } else {
    note("the streamed answer differs from the stored one", "error");
  }
}

async function send(text) {
  if (state.busy) return;
  state.busy = true;
  $("send").disabled = true;
  try {
    await sendAndFollow(text);
  } finally {
    state.busy = false;
    $("send").disabled = false;
  }
}

async function sendAndFollow(text) {
  const userMessage = { id: crypto.randomUUID(), role: "user", parts: [{ type: "text", text }] };
  const body = { id: chatId, messages: [...state.messages, userMessage], trigger: "submit-message" };
  state.messages.push(userMessage);
  state.answer = null;
  state.lastEventId = null;
  render();
  setStatus("submitted");
  const response = await fetch("chat", {
    method: "POST",
    headers: headers({ "content-type": "application/json" }),
    body: JSON.stringify(body),
  });
  const replica = log("POST", "chat", response);
  if (!response.ok) {
    note(`refused: ${response.status} ${await response.text()}`, "error");
    await loadTranscript();
    setStatus("error");
    return;
  }
  await follow(response, replica, null);
}

async function resume() {
  const path = `chat/${encodeURIComponent(chatId)}/stream`;
  const response = await fetch(path, { headers: headers() });
  const replica = log("GET", path, response);
  if (response.status === 200) await follow(response, replica, null);
  else setStatus("idle");
}

$("composer").addEventListener("submit", async (event) => {
  event.preventDefault();
  const text = $("prompt").value.trim();
  if (text) await send(text);
});

$("stop").addEventListener("click", async () => {
  const path = `chat/${encodeURIComponent(chatId)}/stop`;
  const response = await fetch(path, { method: "POST", headers: headers() });
  const replica = log("POST", path, response);
  if (response.ok) note(`stopped by ${replica}: the text so far is kept, status cancelled`, "stop");
  else note(`stop: ${response.status} ${await response.text()}`, "error");
});

(async () => {
  state.busy = true; // the send button stays disabled until a running answer is followed
  try {
    await loadTranscript();
    await resume();
  } finally {
    state.busy = false;
    $("send").disabled = false;
  }
})();
